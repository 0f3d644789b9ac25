// Byte ranges of one file read with pread, through O_DIRECT where the file system takes it
// (the page cache bypassed: a model larger than host memory reads its experts from the disk
// each time, without evicting everything else). Thread-safe: reads are independent preads.
//
// O_DIRECT needs the file offset, the length and the buffer aligned to the device's logical
// block; read() rounds the range out to kAlign (4096, a multiple of every common block size)
// and reads it into a caller's staging buffer of staging_bytes(len) bytes aligned to kAlign,
// returning where the asked-for bytes begin inside it. Where O_DIRECT is refused (tmpfs, some
// overlay file systems: open() or the first read answers EINVAL), reads are buffered
// preads of the same aligned ranges (the same bytes). Past the end of the file, a short
// read, an I/O error: df::Error naming the file and the range.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace df {

class RangeReader {
 public:
  static constexpr size_t kAlign = 4096;
  // direct: try O_DIRECT first. Throws df::Error when the file cannot be opened.
  RangeReader(const std::string& path, bool direct);
  ~RangeReader();
  RangeReader(const RangeReader&) = delete;
  RangeReader& operator=(const RangeReader&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }  // at open
  // Whether reads bypass the page cache (false after a fallback to buffered reads).
  bool direct() const { return direct_.load(std::memory_order_relaxed); }
  // Staging a read of len bytes at any offset needs.
  static size_t staging_bytes(size_t len) { return (len + 2 * kAlign - 1) / kAlign * kAlign + kAlign; }
  // Reads [offset, offset + len) into staging (aligned to kAlign, staging_bytes(len) bytes);
  // returns the first asked-for byte inside it.
  const uint8_t* read(uint64_t offset, size_t len, uint8_t* staging) const;

 private:
  std::string path_;
  int fd_ = -1;         // O_DIRECT when direct_
  int fd_plain_ = -1;   // buffered: the fallback
  uint64_t size_ = 0;
  mutable std::atomic<bool> direct_{false};
};

}  // namespace df
