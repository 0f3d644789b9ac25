#include "store/download.h"

#include <chrono>
#include <filesystem>

#include "common/error.h"
#include "store/file_io.h"
#include "store/sha256.h"

namespace df::store {

namespace {

class Clock {
 public:
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

 private:
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

// A pinned size or digest did not match: permanent, and the part is removed.
class Mismatch : public Error {
 public:
  using Error::Error;
};

}  // namespace

DownloadResult download_file(const std::string& url, const std::string& part_path,
                             std::optional<uint64_t> expected_size, const std::string& expected_sha256,
                             const TransferOptions& opt) {
  PartFile part(part_path);
  const std::string dir = std::filesystem::path(part_path).parent_path().string();
  DownloadResult r;
  uint64_t have = part.size();
  if (expected_size && have > *expected_size) {  // not a prefix of the pinned file
    part.truncate(0);
    have = 0;
  }
  Sha256 hash;
  if (have) sha256_update_from_file(hash, part_path, have);
  r.resumed_from = have;
  std::optional<uint64_t> total = expected_size;  // the size we are heading for, once known
  const Clock clock;
  auto note = [&](const std::string& s) {
    if (opt.on_note) opt.on_note(s);
  };
  auto report = [&](bool finished) {
    if (opt.on_progress)
      opt.on_progress(Progress{have, total.value_or(0), r.transferred, clock.seconds(), finished});
  };
  auto restart = [&](const std::string& why) {
    note(why + ": starting over");
    part.truncate(0);
    hash.reset();
    have = 0;
    ++r.restarts;
    if (r.restarts > 3) throw Error("download of " + url + " restarted " + std::to_string(r.restarts) + " times: giving up");
  };

  try {
    bool done = false;
    while (!done) {
      with_retries(
          opt.http,
          [&](bool& progressed) {
            if (total && have == *total) {
              done = true;
              return;
            }
            if (total) require_free_space(dir, *total - have, "'" + part_path + "'");
            const uint64_t start = have;
            HttpSink sink;
            sink.begin = [&](const HttpResponse& resp) {
              if (resp.status == 206) {
                if (!resp.range_first || *resp.range_first != have)
                  throw TransientError(url + ": the server answered a range request for byte " + std::to_string(have) +
                                       " with a different range");
                if (resp.range_total) {
                  if (expected_size && *resp.range_total != *expected_size)
                    throw Mismatch("size mismatch for " + url + ": the server has " +
                                   std::to_string(*resp.range_total) + " bytes, pinned " +
                                   std::to_string(*expected_size));
                  total = resp.range_total;
                }
              } else {  // 200: the whole file from byte 0
                if (have > 0) restart("the server ignored the Range request");
                if (!expected_size && resp.content_length) total = resp.content_length;
              }
            };
            sink.data = [&](const uint8_t* p, size_t n) {
              if (total && have + n > *total)
                throw Mismatch("the server sent more than the " + std::to_string(*total) + " bytes " +
                               (expected_size ? "pinned" : "announced") + " for " + url);
              write_all(part.fd(), p, n, part_path, total ? *total - have - n : 0);
              hash.update(p, n);
              have += n;
              r.transferred += n;
              progressed = true;
              report(false);
            };
            const HttpResponse resp = http_get(url, have, std::nullopt, sink, opt.http);
            if (resp.status == 416) {
              // Nothing to send from `have` on: either the part is complete, or it does not
              // belong to this remote file.
              if (resp.range_total && expected_size && *resp.range_total != *expected_size)
                throw Mismatch("size mismatch for " + url + ": the server has " + std::to_string(*resp.range_total) +
                               " bytes, pinned " + std::to_string(*expected_size));
              if (resp.range_total && *resp.range_total == have) {
                total = have;
                done = true;
                return;
              }
              restart("the server cannot send from byte " + std::to_string(have) + " (HTTP 416)");
              progressed = true;
              throw TransientError("restarting after HTTP 416");
            }
            if (resp.status != 200 && resp.status != 206) throw_http_status(url, resp);
            if (!total) {  // no size known: the end of a clean transfer is the end of the file
              done = true;
              return;
            }
            if (have < *total) {
              throw TransientError(url + ": the transfer ended at byte " + std::to_string(have) + " of " +
                                   std::to_string(*total) + (have > start ? "" : " without sending data"));
            }
            done = true;
          },
          [&](const std::string& why, double wait) {
            note(why + "; retrying in " + std::to_string(static_cast<int>(wait * 1000 + 0.5)) + " ms");
          });
    }
    if (expected_size && have != *expected_size)
      throw Mismatch("size mismatch for " + url + ": got " + std::to_string(have) + " bytes, pinned " +
                     std::to_string(*expected_size));
    r.size = have;
    r.sha256 = hash.finish();
    if (!expected_sha256.empty() && r.sha256 != expected_sha256)
      throw Mismatch("sha256 mismatch for " + url + ": got " + r.sha256 + ", pinned " + expected_sha256);
    part.sync();
    report(true);
  } catch (const Mismatch&) {
    part.close_and_remove();
    throw;
  } catch (...) {
    if (have == 0) part.close_and_remove();  // nothing worth resuming
    throw;
  }
  return r;
}

}  // namespace df::store
