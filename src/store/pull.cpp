#include "store/pull.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "common/error.h"
#include "gguf/gguf.h"
#include "store/sha256.h"
#include "store/tensor_pull.h"

namespace df::store {

PullPlan plan_pull(const PullRequest& req) {
  PullPlan p;
  p.source = resolve_spec(req.spec);
  Source& s = p.source;
  if (req.size) {
    if (s.size && *s.size != *req.size)
      throw Error("--size " + std::to_string(*req.size) + " contradicts the preset '" + s.preset + "' (" +
                  std::to_string(*s.size) + " bytes)");
    s.size = req.size;
  }
  if (!req.sha256.empty()) {
    std::string h = req.sha256;
    std::transform(h.begin(), h.end(), h.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (!is_sha256_hex(h)) throw Error("--sha256 '" + req.sha256 + "' is not 64 hex digits");
    if (!s.sha256.empty() && s.sha256 != h)
      throw Error("--sha256 " + h + " contradicts the preset '" + s.preset + "' (" + s.sha256 + ")");
    s.sha256 = h;
  }
  p.tensors = req.tensors.empty() ? s.tensors : req.tensors;
  if (p.tensors == s.tensors) p.ranges = s.ranges;
  if (!p.tensors.empty()) {
    if (!req.sha256.empty())
      throw Error("--sha256 pins a whole file, which --tensors does not download; pin the remote file with --size");
    s.sha256.clear();  // a preset's digest is of the whole file
  }
  p.name = req.name.empty() ? s.name : req.name;
  if (!valid_name(p.name))
    throw Error("bad model name '" + p.name + "': use 1..128 of A-Z a-z 0-9 . _ - (not starting with . or -)");
  return p;
}

namespace {
bool same_pull(const Record& r, const PullPlan& p) {
  if (r.source != p.source.url || r.tensors != p.tensors) return false;
  if (p.tensors.empty()) return (p.source.sha256.empty() || r.sha256 == p.source.sha256) && (!p.source.size || r.size == *p.source.size);
  return !p.source.size || r.source_size == *p.source.size;
}
}  // namespace

PullResult pull(Store& store, const PullRequest& req, const TransferOptions& opt) {
  const PullPlan plan = plan_pull(req);
  const Source& s = plan.source;
  PullResult res;
  if (auto existing = store.find(plan.name)) {
    if (same_pull(*existing, plan)) {
      res.record = *existing;
      res.already_present = true;
      return res;
    }
    throw Error("a model named '" + plan.name + "' is already in the store (from " + existing->source +
                "): diskformer rm " + plan.name + " first, or pull with --name");
  }
  Record r;
  r.name = plan.name;
  r.source = s.url;
  r.spec = s.spec;
  r.repo = s.repo;
  r.revision = s.revision;
  r.file = s.file;
  if (plan.tensors.empty()) {
    const DownloadResult d = download_file(s.url, store.part_path(plan.name), s.size, s.sha256, opt);
    // A partial file is never a model: the finished one must parse before it enters the store.
    try {
      gguf::File::open(store.part_path(plan.name));
    } catch (const Error& e) {
      std::remove(store.part_path(plan.name).c_str());
      throw Error(std::string("the downloaded file is not a valid GGUF (removed): ") + e.what());
    }
    r.kind = "download";
    r.size = d.size;
    r.sha256 = d.sha256;
    res.resumed_from = d.resumed_from;
    res.transferred = d.transferred;
    res.restarts = d.restarts;
  } else {
    const TensorPullResult t = pull_tensors(s.url, store.part_path(plan.name), plan.tensors, s.size, opt, plan.ranges);
    r.kind = "tensors";
    r.size = t.size;
    r.sha256 = t.sha256;
    r.tensors = plan.tensors;
    r.source_size = t.remote_size;
    res.resumed_from = t.resumed_from;
    res.transferred = t.transferred;
    res.header_bytes = t.header_bytes;
  }
  res.record = store.commit(r);
  return res;
}

}  // namespace df::store
