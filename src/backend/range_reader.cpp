#include "backend/range_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace df {
namespace {

std::string range_str(uint64_t offset, size_t len) {
  return "bytes " + std::to_string(offset) + ".." + std::to_string(offset + len);
}

}  // namespace

RangeReader::RangeReader(const std::string& path, bool direct) : path_(path) {
  fd_plain_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_plain_ < 0) throw Error("cannot open '" + path + "' for reading: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_plain_, &st) != 0) {
    const int e = errno;
    ::close(fd_plain_);
    throw Error("cannot stat '" + path + "': " + std::strerror(e));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (direct) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    direct_ = fd_ >= 0;  // EINVAL: the file system takes no O_DIRECT
  }
}

RangeReader::~RangeReader() {
  if (fd_ >= 0) ::close(fd_);
  if (fd_plain_ >= 0) ::close(fd_plain_);
}

const uint8_t* RangeReader::read(uint64_t offset, size_t len, uint8_t* staging) const {
  if (offset > size_ || len > size_ - offset)
    throw Error("'" + path_ + "': " + range_str(offset, len) + " lie past the end of the file (" +
                std::to_string(size_) + " bytes)");
  if (reinterpret_cast<uintptr_t>(staging) % kAlign != 0)
    throw Error("RangeReader::read: staging not aligned to " + std::to_string(kAlign) + " bytes");
  const uint64_t a0 = offset / kAlign * kAlign;
  const uint64_t a1 = (offset + len + kAlign - 1) / kAlign * kAlign;
  const size_t want = static_cast<size_t>(a1 - a0), need = static_cast<size_t>(offset + len - a0);
  size_t got = 0;
  bool dir = direct_.load(std::memory_order_relaxed);
  while (got < need) {
    const ssize_t r = ::pread(dir ? fd_ : fd_plain_, staging + got, want - got, static_cast<off_t>(a0 + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EINVAL && dir) {  // O_DIRECT refused: buffered from now on (the same bytes)
        if (got == 0) direct_.store(false, std::memory_order_relaxed);
        dir = false;
        continue;
      }
      throw Error("'" + path_ + "': reading " + range_str(offset, len) + " failed: " + std::strerror(errno));
    }
    if (r == 0)
      throw Error("'" + path_ + "': " + range_str(offset, len) + ": the file ends at byte " + std::to_string(a0 + got) +
                  " (truncated since it was opened?)");
    got += static_cast<size_t>(r);
    if (got % kAlign != 0) dir = false;  // a direct read that stopped mid-block: the rest buffered
  }
  return staging + (offset - a0);
}

}  // namespace df
