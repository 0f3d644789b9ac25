#include "store/tensor_pull.h"

#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "gguf/gguf.h"
#include "store/file_io.h"
#include "store/sha256.h"

namespace df::store {

bool tensor_name_matches(const std::string& name, const std::vector<std::string>& patterns) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const std::string& p) { return ::fnmatch(p.c_str(), name.c_str(), 0) == 0; });
}

namespace {

// Reads bytes [first, last] of the remote file into out (appending), with retries and
// resumption inside the range. Returns the remote file's size from Content-Range.
uint64_t read_range(const std::string& url, uint64_t first, uint64_t last, const TransferOptions& opt,
                    const std::function<void(const uint8_t*, size_t)>& out, uint64_t& transferred) {
  uint64_t pos = first;
  uint64_t total = 0;
  with_retries(
      opt.http,
      [&](bool& progressed) {
        HttpSink sink;
        sink.begin = [&](const HttpResponse& r) {
          if (r.status != 206)
            throw Error("the server of " + url +
                        " ignores Range requests (HTTP 200 to a request for bytes " + std::to_string(pos) + "-" +
                        std::to_string(last) + "): pull the whole file without --tensors");
          if (!r.range_first || *r.range_first != pos || !r.range_total)
            throw TransientError(url + ": the server answered a request for bytes " + std::to_string(pos) + "-" +
                                 std::to_string(last) + " with another range");
          total = *r.range_total;
          if (total == 0) throw Error("the remote file " + url + " is empty");
          last = std::min(last, total - 1);  // a request past the end gets what there is
        };
        sink.data = [&](const uint8_t* p, size_t n) {
          if (n > last + 1 - pos) throw TransientError(url + ": the server sent more than the requested range");
          out(p, n);
          pos += n;
          transferred += n;
          progressed = true;
        };
        const HttpResponse r = http_get(url, pos, last, sink, opt.http);
        if (r.status == 416)
          throw Error("the remote file " + url + " has no bytes " + std::to_string(pos) + "-" + std::to_string(last) +
                      (r.range_total ? " (it has " + std::to_string(*r.range_total) + " bytes)" : ""));
        if (r.status != 206 && r.status != 200) throw_http_status(url, r);
        if (pos <= last)
          throw TransientError(url + ": the transfer of bytes " + std::to_string(first) + "-" + std::to_string(last) +
                               " ended at byte " + std::to_string(pos));
      },
      [&](const std::string& why, double wait) {
        if (opt.on_note) opt.on_note(why + "; retrying in " + std::to_string(static_cast<int>(wait * 1000 + 0.5)) + " ms");
      });
  return total;
}

// The block index L of a tensor named blk.L.*, or -1.
int64_t block_of(const std::string& name) {
  long long l = -1;
  int end = 0;
  if (std::sscanf(name.c_str(), "blk.%lld.%n", &l, &end) == 1 && end > 0) return l;
  return -1;
}

}  // namespace

TrunkRewrite trunk_rewrite(const gguf::File& src, const std::vector<std::string>& chosen) {
  TrunkRewrite r;
  const std::string arch = src.get_string("general.architecture", "");
  const gguf::Value* count = src.find(arch + ".block_count");
  const gguf::Value* nextn = src.find(arch + ".nextn_predict_layers");
  if (arch.empty() || !count || !nextn || !count->is_integer() || !nextn->is_integer()) return r;
  const uint64_t n = count->as_u64("block_count"), k = nextn->as_u64("nextn_predict_layers");
  if (k == 0 || k >= n) return r;
  for (const std::string& t : chosen) {
    const int64_t l = block_of(t);
    if (l >= static_cast<int64_t>(n - k) && l < static_cast<int64_t>(n)) return r;  // a head is taken
  }
  r.applies = true;
  r.block_count_key = arch + ".block_count";
  r.nextn_key = arch + ".nextn_predict_layers";
  r.trunk_layers = n - k;
  return r;
}

std::vector<ByteRange> tensor_extents(const gguf::File& f, const std::vector<const gguf::TensorInfo*>& tensors) {
  std::vector<ByteRange> r;
  for (const gguf::TensorInfo* t : tensors) r.push_back({f.data_offset() + t->offset, t->nbytes});
  std::sort(r.begin(), r.end(), [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
  std::vector<ByteRange> out;
  for (const ByteRange& x : r) {
    if (!out.empty()) {
      ByteRange& last = out.back();
      const uint64_t end = last.offset + last.length;
      const uint64_t padded = (end + f.alignment() - 1) / f.alignment() * f.alignment();
      if (x.offset >= end && x.offset <= padded) {
        last.length = x.offset + x.length - last.offset;
        continue;
      }
    }
    out.push_back(x);
  }
  return out;
}

TensorPullResult pull_tensors(const std::string& url, const std::string& part_path,
                              const std::vector<std::string>& patterns, std::optional<uint64_t> expected_remote_size,
                              const TransferOptions& opt, const std::vector<ByteRange>& expected_ranges) {
  if (patterns.empty()) throw Error("no tensor patterns given");
  TensorPullResult r;
  const auto t0 = std::chrono::steady_clock::now();

  // ---- the remote header: read a prefix, grow it until it parses ----
  std::vector<uint8_t> head;
  auto append = [&](const uint8_t* p, size_t n) { head.insert(head.end(), p, p + n); };
  r.remote_size = read_range(url, 0, std::max<uint64_t>(opt.first_header_read, 32) - 1, opt, append, r.transferred);
  if (expected_remote_size && r.remote_size != *expected_remote_size)
    throw Error("size mismatch for " + url + ": the server has " + std::to_string(r.remote_size) + " bytes, pinned " +
                std::to_string(*expected_remote_size));
  std::unique_ptr<gguf::File> src;
  for (;;) {
    try {
      src = gguf::File::header_from_memory(head.data(), head.size(), r.remote_size);
      break;
    } catch (const gguf::HeaderTruncated& e) {
      if (head.size() >= r.remote_size) throw;
      const uint64_t want = std::min<uint64_t>(r.remote_size, std::max<uint64_t>(e.needed, 2 * head.size()));
      read_range(url, head.size(), want - 1, opt, append, r.transferred);
    }
  }
  r.header_bytes = head.size();

  // ---- the chosen tensors ----
  for (const std::string& p : patterns) {
    const bool any = std::any_of(src->tensors().begin(), src->tensors().end(),
                                 [&](const gguf::TensorInfo& t) { return tensor_name_matches(t.name, {p}); });
    if (!any)
      throw Error("tensor pattern '" + p + "' matches none of the " + std::to_string(src->tensors().size()) +
                  " tensors of " + url + (src->tensors().empty() ? "" : " (the first is '" + src->tensors()[0].name + "')"));
  }
  gguf::Writer w;
  std::vector<const gguf::TensorInfo*> chosen;
  for (const gguf::TensorInfo& t : src->tensors())
    if (tensor_name_matches(t.name, patterns)) {
      chosen.push_back(&t);
      r.tensors.push_back(t.name);
      r.tensor_bytes += t.nbytes;
    }
  const TrunkRewrite trunk = trunk_rewrite(*src, r.tensors);
  for (const auto& [k, v] : src->metadata()) {
    if (trunk.applies && k == trunk.nextn_key) continue;
    gguf::Value out = v;
    if (trunk.applies && k == trunk.block_count_key) out.v = trunk.trunk_layers;
    w.set(k, out);
  }
  if (trunk.applies && opt.on_note)
    opt.on_note("no tensor of the MTP (nextn) blocks taken: written as a trunk (" + trunk.block_count_key + " = " +
                std::to_string(trunk.trunk_layers) + ", no " + trunk.nextn_key + ")");
  r.trunk = trunk.applies;
  for (const gguf::TensorInfo* t : chosen) w.add_tensor_info(t->name, t->type, t->ne);
  if (!expected_ranges.empty()) {
    const std::vector<ByteRange> got = tensor_extents(*src, chosen);
    if (got != expected_ranges) {
      auto show = [](const std::vector<ByteRange>& v) {
        std::string s;
        for (const ByteRange& b : v) s += (s.empty() ? "" : ", ") + std::to_string(b.offset) + "+" + std::to_string(b.length);
        return "[" + s + "]";
      };
      throw Error("the tensors matching the patterns lie at " + show(got) + " in " + url + ", pinned at " +
                  show(expected_ranges));
    }
  }
  const gguf::Writer::Layout layout = w.layout();
  head.clear();
  head.shrink_to_fit();

  // ---- the part: the same metadata block means the same layout, so resume from its end ----
  PartFile part(part_path);
  uint64_t have = part.size();
  bool same = have >= layout.meta.size() && have <= layout.file_size;
  if (same) {
    std::vector<uint8_t> cur(layout.meta.size());
    part.seek(0);
    same = ::pread(part.fd(), cur.data(), cur.size(), 0) == static_cast<ssize_t>(cur.size()) && cur == layout.meta;
  }
  if (!same) {
    part.truncate(0);
    have = 0;
    write_all(part.fd(), layout.meta.data(), layout.meta.size(), part_path);
    have = layout.meta.size();
  }
  part.seek(have);
  r.resumed_from = have;
  const std::string dir = std::filesystem::path(part_path).parent_path().string();
  require_free_space(dir, layout.file_size - have, "'" + part_path + "'");

  auto report = [&](bool finished) {
    if (opt.on_progress)
      opt.on_progress(Progress{have, layout.file_size, r.transferred,
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), finished});
  };
  const uint64_t data0 = layout.meta.size();
  const std::vector<uint8_t> zeros(w.alignment(), 0);
  for (size_t i = 0; i < chosen.size(); ++i) {
    const gguf::TensorInfo& out = layout.tensors[i];
    const uint64_t begin = data0 + out.offset, end = begin + out.nbytes;
    const uint64_t padded_end = i + 1 < chosen.size() ? data0 + layout.tensors[i + 1].offset : layout.file_size;
    if (have >= padded_end) continue;
    if (have < end) {
      const uint64_t src_first = src->data_offset() + chosen[i]->offset + (have - begin);
      const uint64_t src_last = src->data_offset() + chosen[i]->offset + chosen[i]->nbytes - 1;
      read_range(
          url, src_first, src_last, opt,
          [&](const uint8_t* p, size_t n) {
            write_all(part.fd(), p, n, part_path, layout.file_size - have - n);
            have += n;
            report(false);
          },
          r.transferred);
    }
    write_all(part.fd(), zeros.data(), padded_end - have, part_path);
    have = padded_end;
  }
  part.sync();
  if (part.size() != layout.file_size)
    throw Error("'" + part_path + "' has " + std::to_string(part.size()) + " bytes, expected " +
                std::to_string(layout.file_size));

  // ---- check what was written: a valid GGUF with the chosen tensors ----
  auto local = gguf::File::open(part_path);
  for (const gguf::TensorInfo* t : chosen) {
    const gguf::TensorInfo* l = local->find_tensor(t->name);
    if (!l || l->type != t->type || l->ne != t->ne) throw Error("'" + part_path + "' does not hold tensor '" + t->name + "' as expected");
  }
  r.size = layout.file_size;
  r.sha256 = sha256_file(part_path);
  report(true);
  return r;
}

}  // namespace df::store
