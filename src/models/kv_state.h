// A model state whose only history is its KV caches (pure attention: qwen3's trunk, the MTP
// head's layer): rewinding is moving the position, nothing is copied. Subclasses own the caches
// and say their bytes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "common/error.h"
#include "models/blocks.h"
#include "models/model.h"

namespace df {

class KvState : public ModelState {
 public:
  explicit KvState(const StateOptions& opt) : opt_(opt) {}
  int64_t n_ctx() const override { return opt_.n_ctx; }
  int64_t max_chunk() const override { return opt_.max_chunk; }
  int64_t max_snapshots() const override { return opt_.max_snapshots; }
  bool rewindable() const override { return true; }
  int64_t position() const override { return pos; }
  std::unique_ptr<StateCheckpoint> capture(int64_t at) override {
    auto c = std::make_unique<StateCheckpoint>();
    c->pos = at;
    return c;
  }
  void restore(const StateCheckpoint& c) override { pos = c.pos; }
  void accept(int64_t n_rows) override {
    if (n_rows < 1 || n_rows > last_n) throw Error("accept: " + std::to_string(n_rows) + " rows of a forward of " + std::to_string(last_n));
    pos = last_pos0 + n_rows;
    last_n = n_rows;
  }
  void truncate(int64_t p) override {
    if (p < 0 || p > pos) throw Error("truncate: position " + std::to_string(p) + " is past the state's " + std::to_string(pos));
    pos = p;
  }
  bool use_graphs() const { return opt_.graphs; }

  blocks::StepGraphs graphs;          // recorded decode steps over these caches
  int64_t pos = 0;                    // where the last forward ended
  int64_t last_pos0 = 0, last_n = 0;  // the last forward's rows of this state

 private:
  StateOptions opt_;
};

}  // namespace df
