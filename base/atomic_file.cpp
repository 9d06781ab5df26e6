// SPDX-License-Identifier: Apache-2.0
#include "base/atomic_file.h"

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

AtomicFileWriter::AtomicFileWriter(const fs::path& path_in) {
  if (path_in.empty())
    throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                            "write_file_atomic: empty path");
  m_path = path_in;
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(m_path, ec))) {
    // Replace what the link points at, so the link survives.
    const fs::path target = fs::read_symlink(m_path, ec);
    if (!ec) m_path = target.is_absolute() ? target : m_path.parent_path() / target;
  }
  if (fs::is_directory(m_path, ec)) throw_errno(EISDIR, "cannot write", m_path);
  m_dir = m_path.has_parent_path() ? m_path.parent_path() : fs::path(".");

  // Keep an existing file's permission bits; new files get 0666 minus the umask via open().
  mode_t mode = 0666;
  struct stat st {};
  const bool existed = ::stat(m_path.c_str(), &st) == 0;
  if (existed) mode = st.st_mode & 07777;

  for (int attempt = 0; attempt < 100 && m_fd < 0; ++attempt) {
    m_temp = temp_name(m_path, attempt);
    m_fd = ::open(m_temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, existed ? 0600 : mode);
    if (m_fd < 0 && errno != EEXIST) throw_errno(errno, "cannot create a temporary file in", m_dir);
  }
  if (m_fd < 0) throw_errno(EEXIST, "cannot create a temporary file in", m_dir);
  if (existed && ::fchmod(m_fd, mode) != 0) {
    const int err = errno;
    ::close(m_fd);
    ::unlink(m_temp.c_str());
    throw_errno(err, "cannot set the mode of", m_temp);
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (m_fd >= 0) ::close(m_fd);
  if (!m_committed) ::unlink(m_temp.c_str());
}

void AtomicFileWriter::write(std::string_view data) {
  if (m_fd < 0) throw_errno(EBADF, "cannot write (already committed)", m_temp);
  write_all(m_fd, data, m_temp);
  m_written += data.size();
}

void AtomicFileWriter::sync() {
  if (m_fd >= 0 && ::fsync(m_fd) != 0) throw_errno(errno, "cannot sync", m_temp);
}

void AtomicFileWriter::commit() {
  if (m_committed) return;
  sync();
  const int rc = ::close(m_fd);
  m_fd = -1;
  if (rc != 0) throw_errno(errno, "cannot close", m_temp);
  if (::rename(m_temp.c_str(), m_path.c_str()) != 0) throw_errno(errno, "cannot replace", m_path);
  m_committed = true;
  sync_directory(m_dir);
}

void write_file_atomic(const fs::path& path, std::string_view data,
                       const AtomicWriteOptions& options) {
  AtomicFileWriter file(path);
  const auto hook = [&](AtomicWriteStage stage) {
    if (options.fault_hook) options.fault_hook(stage, file.temp_path());
  };
  hook(AtomicWriteStage::kCreated);
  const size_t half = data.size() / 2;
  file.write(data.substr(0, half));
  hook(AtomicWriteStage::kPartialWrite);
  file.write(data.substr(half));
  hook(AtomicWriteStage::kWritten);
  file.sync();
  hook(AtomicWriteStage::kSynced);
  file.commit();
}

}  // namespace sinkscope
