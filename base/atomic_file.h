// SPDX-License-Identifier: Apache-2.0
// Atomic file replacement: readers see either the old file or the complete new one, never a
// torn write, and a crash or error mid-write leaves the old file intact.
//
// Steps: create a temporary file next to the target (same directory, hence same file system),
// write everything, fsync it, rename it over the target, fsync the directory so the rename
// itself is durable. On any failure the temporary file is removed and the error is thrown.
#pragma once

#include <cstdint>
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

// The same replacement for data written piece by piece (a file too large to hold in memory):
// the constructor creates the temporary file, write() appends, commit() syncs and renames it over
// the target. Destroying the writer without commit() (an error, an exception) removes the
// temporary file and leaves the target untouched. Same symlink and permission rules as
// write_file_atomic; errors are std::system_error naming the path.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::filesystem::path& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(std::string_view data);
  void write(const void* data, size_t n) {
    write(std::string_view(static_cast<const char*>(data), n));
  }
  uint64_t bytes_written() const { return m_written; }
  const std::filesystem::path& temp_path() const { return m_temp; }
  const std::filesystem::path& target() const { return m_path; }
  void sync();    // fsync the temporary file (commit() does it too)
  void commit();  // fsync, rename over the target, fsync the directory

 private:
  std::filesystem::path m_path;  // the target, symlinks resolved
  std::filesystem::path m_dir;
  std::filesystem::path m_temp;
  int m_fd = -1;
  bool m_committed = false;
  uint64_t m_written = 0;
};

}  // namespace sinkscope
