// The per-sequence state of a qwen35 model: the live recurrent state, its snapshot slots
// (rollback without replay), the KV caches of the attention layers, and a pool of
// preallocated checkpoint buffers.
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "models/qwen35_parts.h"

namespace df::qwen35 {

RecurrentSet RecurrentSet::make(Backend& b, const Hparams& hp, int64_t slots) {
  const ModelInfo& m = hp.info;
  const int64_t S = m.ssm_state, Hv = m.ssm_v_heads;
  RecurrentSet r;
  if (slots <= 0) return r;
  for (int64_t l = 0; l < m.n_layer; ++l) {
    if (!hp.recurrent[static_cast<size_t>(l)]) continue;
    r.conv.push_back(alloc_tensor(b, GgmlType::F32, hp.conv_dim, slots * (m.ssm_conv_kernel - 1), r.buffers));
    r.ssm.push_back(alloc_tensor(b, GgmlType::F32, S, slots * Hv * S, r.buffers));
    r.bytes += r.conv.back().nbytes() + r.ssm.back().nbytes();
  }
  return r;
}

// A checkpoint: a pool buffer (or a fresh one when the pool is exhausted) holding the copy.
class Checkpoint final : public StateCheckpoint {
 public:
  std::shared_ptr<RecurrentSet> set;
  const void* owner = nullptr;  // the state it was captured from
};

State::State(Backend& b, const Hparams& hp, const StateOptions& opt) : backend_(b), hp_(hp), opt_(opt) {
  const ModelInfo& m = hp.info;
  const GgmlType kt = opt.kv_f32 ? GgmlType::F32 : GgmlType::F16;
  for (int64_t l = 0; l < m.n_layer; ++l)
    if (!hp.recurrent[static_cast<size_t>(l)]) {
      kv_cache.push_back(b.alloc_kv_cache(opt.n_ctx, m.n_head_kv * m.head_dim, kt));
      cache_bytes_ += kv_cache.back().nbytes();
    }
  if (m.n_layer_recurrent > 0) {
    live = RecurrentSet::make(b, hp, 1);
    snap = RecurrentSet::make(b, hp, opt.max_snapshots);
    cache_bytes_ += live.bytes + snap.bytes;
    for (int i = 0; i < opt.max_checkpoints; ++i) {
      pool_.push_back(std::make_shared<RecurrentSet>(RecurrentSet::make(b, hp, 1)));
      cache_bytes_ += pool_.back()->bytes;
    }
    zero_conv_ = alloc_tensor(b, GgmlType::F32, live.conv[0].cols, live.conv[0].rows, buffers_);
    zero_ssm_ = alloc_tensor(b, GgmlType::F32, live.ssm[0].cols, live.ssm[0].rows, buffers_);
    const std::vector<uint8_t> zeros(std::max(zero_conv_.nbytes(), zero_ssm_.nbytes()), 0);
    b.upload(zero_conv_, zeros.data(), zero_conv_.nbytes());  // once, at creation
    b.upload(zero_ssm_, zeros.data(), zero_ssm_.nbytes());
    cache_bytes_ += zero_conv_.nbytes() + zero_ssm_.nbytes();
  }
}

void State::begin(int64_t pos0) {
  if (pos0 == 0) {  // a new sequence: recurrent and conv states start at zero
    std::vector<Backend::CopyPair> z;
    for (const auto& t : live.conv) z.push_back({zero_conv_, t});
    for (const auto& t : live.ssm) z.push_back({zero_ssm_, t});
    backend_.copy_batch(z);
  } else if (!rewindable() && pos0 != pos) {
    throw Error("forward at position " + std::to_string(pos0) + ", but the recurrent state is at " +
                std::to_string(pos) + " (restore a checkpoint first)");
  }
  pos = -1;  // invalid until the forward has run through
  last_n_ = 0;
}

void State::end(int64_t pos0, int64_t n, bool snapshots) {
  pos = pos0 + n;
  last_pos0_ = pos0;
  last_n_ = n;
  last_snapshots_ = snapshots;
}

void State::accept(int64_t n_rows) {
  if (n_rows < 1 || n_rows > last_n_)
    throw Error("accept: " + std::to_string(n_rows) + " rows, but the last forward ran " + std::to_string(last_n_));
  if (n_rows < last_n_ && !rewindable()) {
    if (!last_snapshots_) throw Error("accept: the last forward kept no snapshots (ForwardOptions::snapshots)");
    // Slot n_rows - 1 holds the state after row n_rows - 1: copy it over the live state.
    const int64_t H = hp_.info.ssm_conv_kernel - 1, Hs = hp_.info.ssm_v_heads * hp_.info.ssm_state;
    std::vector<Backend::CopyPair> c;
    for (size_t i = 0; i < live.conv.size(); ++i) {
      c.push_back({snap.conv[i].slice_rows((n_rows - 1) * H, H), live.conv[i]});
      c.push_back({snap.ssm[i].slice_rows((n_rows - 1) * Hs, Hs), live.ssm[i]});
    }
    backend_.copy_batch(c);
  }
  pos = last_pos0_ + n_rows;
  last_n_ = n_rows;  // slots 0 .. n_rows-1 still hold this forward's states
}

void State::truncate(int64_t p) {
  if (p < 0 || p > pos) throw Error("truncate: position " + std::to_string(p) + " is past the state's " + std::to_string(pos));
  if (p == pos) return;
  if (!rewindable()) throw Error("truncate: a recurrent state cannot rewind by itself (use accept() or a checkpoint)");
  pos = p;
  last_n_ = 0;
}

std::unique_ptr<StateCheckpoint> State::capture(int64_t at) {
  if (at != pos) throw Error("checkpoint at position " + std::to_string(at) + ", but the state is at " + std::to_string(pos));
  auto c = std::make_unique<Checkpoint>();
  c->pos = pos;
  c->owner = this;
  for (const auto& s : pool_)
    if (s.use_count() == 1) {  // held by the pool only: free
      c->set = s;
      break;
    }
  if (!c->set) c->set = std::make_shared<RecurrentSet>(RecurrentSet::make(backend_, hp_, live.conv.empty() ? 0 : 1));
  std::vector<Backend::CopyPair> cp;
  for (size_t i = 0; i < live.conv.size(); ++i) {
    cp.push_back({live.conv[i], c->set->conv[i]});
    cp.push_back({live.ssm[i], c->set->ssm[i]});
  }
  backend_.copy_batch(cp);
  c->bytes = c->set->bytes;
  return c;
}

void State::restore(const StateCheckpoint& base) {
  const auto* c = dynamic_cast<const Checkpoint*>(&base);
  if (!c || c->owner != this) throw Error("restore: the checkpoint was not captured from this session's state");
  std::vector<Backend::CopyPair> cp;
  for (size_t i = 0; i < live.conv.size(); ++i) {
    cp.push_back({c->set->conv[i], live.conv[i]});
    cp.push_back({c->set->ssm[i], live.ssm[i]});
  }
  backend_.copy_batch(cp);
  pos = c->pos;
  last_n_ = 0;
}

}  // namespace df::qwen35
