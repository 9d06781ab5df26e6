// SPDX-License-Identifier: Apache-2.0
// Atomic file replacement: readers see either the old file or the complete new one, never a
// torn write, and a crash or error mid-write leaves the old file intact.
//
// Steps: create a temporary file next to the target (same directory, hence same file system),
// write everything, fsync it, rename it over the target, fsync the directory so the rename
// itself is durable. On any failure the temporary file is removed and the error is thrown.
#pragma once

#include <filesystem>
#include <functional>
#include <string_view>

namespace sinkscope {

enum class AtomicWriteStage {
  kCreated,       // the temporary file exists and is empty
  kPartialWrite,  // about half the data has been written to it
  kWritten,       // all data written, not yet synced
  kSynced,        // fsync done, not yet renamed
};

struct AtomicWriteOptions {
  // Test hook, called at each stage with the temporary file's path. Throwing from it simulates a
  // failure (or a crash) at that point: the temporary file is removed and the exception
  // propagates; the target is untouched for every stage before the rename.
  std::function<void(AtomicWriteStage, const std::filesystem::path& temp)> fault_hook;
};

// Writes `data` to `path` atomically. A symbolic link at `path` is followed (its target is
// replaced, the link stays). New files get mode 0666 minus the umask; an existing file's
// permission bits are kept. Throws std::system_error naming the path on failure.
void write_file_atomic(const std::filesystem::path& path, std::string_view data,
                       const AtomicWriteOptions& options = {});

}  // namespace sinkscope
