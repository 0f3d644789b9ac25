// File operations of the store: writes that report a full disk clearly, free-space checks,
// a locked .part file, atomic placement.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace df::store {

// Writes all n bytes at the descriptor's position; throws df::Error naming the file (and, on
// ENOSPC/EDQUOT, saying the disk is full and how many bytes were still to come).
void write_all(int fd, const void* data, size_t n, const std::string& path, uint64_t still_to_come = 0);
// Bytes free for an unprivileged writer on the file system that holds dir.
uint64_t free_bytes(const std::string& dir);
// Throws a clear error when dir lacks `needed` free bytes.
void require_free_space(const std::string& dir, uint64_t needed, const std::string& what);
// "1.5 GiB", "12.0 MiB", "512 B".
std::string human_bytes(double bytes);

// A .part file opened for reading and writing, created when missing, exclusively locked
// (flock) so that two pulls of one model cannot interleave. Closed on destruction.
class PartFile {
 public:
  explicit PartFile(const std::string& path);
  ~PartFile();
  PartFile(const PartFile&) = delete;
  PartFile& operator=(const PartFile&) = delete;
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  uint64_t size() const;
  void truncate(uint64_t n);        // and seek to n
  void seek(uint64_t n);
  void sync();                      // fsync
  void close_and_remove();          // after a verification failure: nothing is left behind

 private:
  std::string path_;
  int fd_ = -1;
};

// Moves `from` onto `to` atomically (rename(2)) and syncs the directory.
void atomic_rename(const std::string& from, const std::string& to);
// Writes a small text file atomically: to `path`.tmp, fsync, rename.
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace df::store
