// SPDX-License-Identifier: Apache-2.0
// Writes a file atomically: a temporary file in the same folder, flushed and synced, then
// renamed over the target. Readers see the old file or the whole new one, never a torn write.
// (The profiler sits below engine/, so it has its own copy of this small helper.)
#pragma once

#include <filesystem>
#include <string_view>

#include "profiler/status.h"

namespace sinkscope::prof {

Status write_file_atomic(const std::filesystem::path& path, std::string_view contents);

}  // namespace sinkscope::prof
