// SPDX-License-Identifier: Apache-2.0
#include "profiler/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace sinkscope::prof {
namespace {

std::string errno_text(const std::string& what, const std::filesystem::path& p) {
  return what + " " + p.string() + ": " + std::strerror(errno);
}

}  // namespace

Status write_file_atomic(const std::filesystem::path& path, std::string_view contents) {
  if (path.empty()) return Status::error("no output file name");
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  std::string name = ".";
  name += path.filename().string();
  name += ".tmp-XXXXXX";
  std::string tmpl = (dir / name).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return Status::error(errno_text("cannot create a temporary file in", dir));
  const std::filesystem::path tmp = tmpl;
  auto fail = [&](const std::string& what) {
    Status s = Status::error(errno_text(what, tmp));
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("cannot write");
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  // mkstemp creates 0600; a trace is an ordinary user file.
  if (::fchmod(fd, 0644) != 0) return fail("cannot set permissions of");
  if (::fsync(fd) != 0) return fail("cannot sync");
  if (::close(fd) != 0) {
    Status s = Status::error(errno_text("cannot close", tmp));
    ::unlink(tmp.c_str());
    return s;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = Status::error(errno_text("cannot rename the temporary file to", path));
    ::unlink(tmp.c_str());
    return s;
  }
  return Status::success();
}

}  // namespace sinkscope::prof
