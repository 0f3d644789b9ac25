#include "store/file_io.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/error.h"

namespace df::store {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    ++u;
  }
  char s[32];
  std::snprintf(s, sizeof s, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return s;
}

void write_all(int fd, const void* data, size_t n, const std::string& path, uint64_t still_to_come) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int e = w < 0 ? errno : ENOSPC;
      if (e == ENOSPC || e == EDQUOT)
        throw Error("disk full writing '" + path + "'" +
                    (still_to_come ? " (" + human_bytes(static_cast<double>(still_to_come)) + " still to come)" : "") +
                    ": free some space and run the same command again to resume");
      throw Error("cannot write '" + path + "': " + std::strerror(e));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

uint64_t free_bytes(const std::string& dir) {
  struct statvfs s {};
  if (::statvfs(dir.c_str(), &s) != 0) throw Error("cannot stat the file system of '" + dir + "': " + std::strerror(errno));
  return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
}

void require_free_space(const std::string& dir, uint64_t needed, const std::string& what) {
  const uint64_t free = free_bytes(dir);
  if (free < needed)
    throw Error("not enough disk space in '" + dir + "' for " + what + ": needs " +
                human_bytes(static_cast<double>(needed)) + " more, " + human_bytes(static_cast<double>(free)) +
                " free");
}

PartFile::PartFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    if (e == EWOULDBLOCK) throw Error("'" + path + "' is in use by another diskformer process (a pull of the same model)");
    throw Error("cannot lock '" + path + "': " + std::strerror(e));
  }
  seek(size());
}

PartFile::~PartFile() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t PartFile::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw Error("cannot stat '" + path_ + "': " + std::strerror(errno));
  return static_cast<uint64_t>(st.st_size);
}

void PartFile::truncate(uint64_t n) {
  if (::ftruncate(fd_, static_cast<off_t>(n)) != 0) throw Error("cannot truncate '" + path_ + "': " + std::strerror(errno));
  seek(n);
}

void PartFile::seek(uint64_t n) {
  if (::lseek(fd_, static_cast<off_t>(n), SEEK_SET) < 0) throw Error("cannot seek in '" + path_ + "': " + std::strerror(errno));
}

void PartFile::sync() {
  if (::fsync(fd_) != 0) {
    const int e = errno;
    if (e == ENOSPC || e == EDQUOT) throw Error("disk full writing '" + path_ + "'");
    throw Error("cannot sync '" + path_ + "': " + std::strerror(e));
  }
}

void PartFile::close_and_remove() {
  ::unlink(path_.c_str());
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {
void sync_dir(const std::string& dir) {
  const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d >= 0) {
    ::fsync(d);
    ::close(d);
  }
}
}  // namespace

void atomic_rename(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw Error("cannot move '" + from + "' to '" + to + "': " + std::strerror(errno));
  sync_dir(std::filesystem::path(to).parent_path().string());
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create '" + tmp + "': " + std::strerror(errno));
  try {
    write_all(fd, text.data(), text.size(), tmp);
    if (::fsync(fd) != 0) throw Error("cannot sync '" + tmp + "': " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  atomic_rename(tmp, path);
}

}  // namespace df::store
