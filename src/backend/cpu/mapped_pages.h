// Page residency of a mapped file's bytes: which of the pages under a byte range are in the
// page cache (mincore), and faulting the missing ones in before a kernel reads them, so that
// the time a read waits for the disk can be measured apart from the compute (the CPU
// backend's expert stats: CpuBackend::expert_stats).
//
// A page "resident" here is one the kernel's page cache holds (mincore's bit 0 over a file
// mapping): touching it costs at most a minor fault. A missing page costs a read from the
// file's device on first touch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace df::cpu {

// The system's page size in bytes (sysconf(_SC_PAGESIZE), read once).
size_t page_size();

// The pages that cover [p, p + bytes): first is p rounded down to a page, pages their count
// (0 for an empty range).
struct PageSpan {
  const uint8_t* first = nullptr;
  int64_t pages = 0;
};
PageSpan page_span(const void* p, size_t bytes);

// How many pages of s are not resident; `vec` is mincore's scratch (one byte a page, grown on
// demand). A range mincore cannot answer (not mapped) counts as resident: 0.
int64_t missing_pages(const PageSpan& s, std::vector<unsigned char>& vec);

// missing[i] = how many pages of spans[i] are not resident, for spans in ascending address
// order that do not overlap, with one mincore over each run of spans whose gaps are at most
// merge_gap pages (a mincore call costs about what its walk of ~1000 resident pages costs:
// measured 0.7 us a call + 0.7 ns a page, so a decode's few experts of one stack, close
// together in a small model, take one call instead of one each).
void missing_pages_each(std::span<const PageSpan> spans, int64_t merge_gap, std::vector<unsigned char>& vec,
                        int64_t* missing);

// Starts reading s's pages into the page cache (madvise MADV_WILLNEED: the kernel queues the
// reads of the whole range at once; returns without waiting).
void advise_willneed(const PageSpan& s);

// Reads one byte of every page of s (each read waits for its page), so that all of s is
// resident when it returns (unless memory pressure evicts it again). The bytes are not
// changed: a read of a read-only mapping.
void touch_pages(const PageSpan& s);

}  // namespace df::cpu
