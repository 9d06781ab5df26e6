// SPDX-License-Identifier: Apache-2.0
#include "engine/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <system_error>

namespace sinkscope {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void throw_errno(int err, const std::string& what, const fs::path& p) {
  throw std::system_error(err, std::generic_category(), what + " " + p.string());
}

// Closes the descriptor and removes the temporary file unless released (after the rename).
class TempFile {
 public:
  TempFile(int fd, fs::path path) : m_fd(fd), m_path(std::move(path)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    close_fd();
    if (!m_released) ::unlink(m_path.c_str());
  }
  int fd() const { return m_fd; }
  const fs::path& path() const { return m_path; }
  int close_fd() {
    int rc = 0;
    if (m_fd >= 0) rc = ::close(m_fd);
    m_fd = -1;
    return rc;
  }
  void release() { m_released = true; }

 private:
  int m_fd;
  fs::path m_path;
  bool m_released = false;
};

// A name that cannot clash with another writer in this or another process: pid, a per-process
// counter and the clock. O_EXCL makes a clash an error we retry rather than a shared file.
fs::path temp_name(const fs::path& target, int attempt) {
  static std::atomic<unsigned> counter{0};
  const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
  // Built with append(): GCC 12 warns falsely (-Wrestrict) on `"." + std::string`.
  std::string name(1, '.');
  name.append(target.filename().string()).append(".tmp.");
  name.append(std::to_string(::getpid())).append(".").append(std::to_string(counter++));
  name.append(".").append(std::to_string(static_cast<unsigned long long>(ticks) % 1000000007ULL));
  name.append(".").append(std::to_string(attempt));
  return target.parent_path() / name;
}

void write_all(int fd, std::string_view data, const fs::path& temp) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "cannot write", temp);
    }
    done += static_cast<size_t>(n);
  }
}

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno(errno, "cannot open directory", dir);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems cannot sync directories (EINVAL); the rename has still happened.
  if (rc != 0 && err != EINVAL) throw_errno(err, "cannot sync directory", dir);
}

}  // namespace

void write_file_atomic(const fs::path& path_in, std::string_view data,
                       const AtomicWriteOptions& options) {
  if (path_in.empty())
    throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                            "write_file_atomic: empty path");
  fs::path path = path_in;
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(path, ec))) {
    // Replace what the link points at, so the link survives.
    const fs::path target = fs::read_symlink(path, ec);
    if (!ec) path = target.is_absolute() ? target : path.parent_path() / target;
  }
  if (fs::is_directory(path, ec)) throw_errno(EISDIR, "cannot write", path);
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");

  // Keep an existing file's permission bits; new files get 0666 minus the umask via open().
  mode_t mode = 0666;
  struct stat st {};
  const bool existed = ::stat(path.c_str(), &st) == 0;
  if (existed) mode = st.st_mode & 07777;

  int fd = -1;
  fs::path temp;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    temp = temp_name(path, attempt);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, existed ? 0600 : mode);
    if (fd < 0 && errno != EEXIST) throw_errno(errno, "cannot create a temporary file in", dir);
  }
  if (fd < 0) throw_errno(EEXIST, "cannot create a temporary file in", dir);
  TempFile file(fd, temp);
  const auto hook = [&](AtomicWriteStage stage) {
    if (options.fault_hook) options.fault_hook(stage, file.path());
  };
  hook(AtomicWriteStage::kCreated);
  if (existed && ::fchmod(file.fd(), mode) != 0) throw_errno(errno, "cannot set the mode of", temp);

  const size_t half = data.size() / 2;
  write_all(file.fd(), data.substr(0, half), temp);
  hook(AtomicWriteStage::kPartialWrite);
  write_all(file.fd(), data.substr(half), temp);
  hook(AtomicWriteStage::kWritten);
  if (::fsync(file.fd()) != 0) throw_errno(errno, "cannot sync", temp);
  hook(AtomicWriteStage::kSynced);
  if (file.close_fd() != 0) throw_errno(errno, "cannot close", temp);
  if (::rename(temp.c_str(), path.c_str()) != 0) throw_errno(errno, "cannot replace", path);
  file.release();
  sync_directory(dir);
}

}  // namespace sinkscope
