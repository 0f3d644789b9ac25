// Whole-file download into a .part file: resumes from the bytes already there with a Range
// request, restarts when the server ignores Range or the part does not fit the remote file,
// retries transient failures with backoff, hashes as it goes (sha256 over the whole file),
// and checks the pinned size and digest. On a mismatch the part is removed and an error
// thrown; on success the complete part is left for the caller to rename into place.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "store/http.h"
#include "store/progress.h"

namespace df::store {

struct TransferOptions {
  HttpOptions http;
  std::function<void(const Progress&)> on_progress;  // called often; throttle when drawing
  std::function<void(const std::string&)> on_note;   // retries, restarts (one line each)
  uint64_t first_header_read = 1 << 20;              // range reads: the first prefix of a remote GGUF read
};

struct DownloadResult {
  uint64_t size = 0;
  std::string sha256;
  uint64_t resumed_from = 0;      // bytes of the part present when this call started
  uint64_t transferred = 0;       // body bytes received by this call (restarted bytes included)
  int restarts = 0;               // times the part was thrown away and started over
};

DownloadResult download_file(const std::string& url, const std::string& part_path,
                             std::optional<uint64_t> expected_size, const std::string& expected_sha256,
                             const TransferOptions& opt);

}  // namespace df::store
