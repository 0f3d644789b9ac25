// Dropping a file's pages from the page cache in tests (no root needed: clean pages only).
#pragma once
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <string>

namespace df::testutil {

// Evicts the pages of `path` from the page cache, `map` [map, map + bytes) being this process's
// read-only mapping of it (page-aligned, as mmap returns it; null: none). A page mapped into
// a process's page tables is not dropped by posix_fadvise, so the mapping's entries go first
// (madvise MADV_DONTNEED: a read-only private mapping refaults the same bytes from the file);
// dirty pages (a file just written) are written back first (fdatasync). Eviction can still be
// partial (pages another process maps, a kernel that keeps some): callers check with mincore.
// Returns false when the file cannot be opened.
inline bool evict_file_pages(const std::string& path, const void* map, size_t bytes) {
  if (map && bytes > 0) ::madvise(const_cast<void*>(map), bytes, MADV_DONTNEED);
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  return true;
}

}  // namespace df::testutil
