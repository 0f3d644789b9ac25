#include <string>

#include "common/error.h"
#include "diskformer/generator.h"

namespace df {
namespace {

bool lookahead_of(Session& s) {
  const int mode = s.engine().options().decode_lookahead;
  return mode == 2 || (mode == 1 && s.engine().backend().asynchronous());
}

}  // namespace

GreedySteps::GreedySteps(Session& session) : GreedySteps(session, lookahead_of(session)) {}

GreedySteps::GreedySteps(Session& session, bool lookahead) : session_(session), lookahead_(lookahead) {
  Backend& b = session.engine().backend();
  for (int i = 0; i < 2; ++i) {
    best_[i] = alloc_tensor(b, GgmlType::I32, 1, 1, buffers_);
    reader_[i] = b.host_reader(sizeof(Token));
  }
}

Token GreedySteps::next(Token t, bool then_append) {
  Backend& b = session_.engine().backend();
  if (queued_) {
    if (t != queued_id_)
      throw Error("GreedySteps: the queued step appends " + std::to_string(queued_id_) + ", not " + std::to_string(t));
    queued_ = false;  // its forward, argmax and read are in flight into best_[cur_]
  } else {
    const ForwardOutputs o = session_.append({t});
    b.argmax(o.logits, best_[cur_]);
    reader_[cur_]->start(best_[cur_]);
  }
  const int64_t p = session_.position();  // after t
  const bool ahead = lookahead_ && then_append && p < session_.n_ctx();
  if (ahead) {  // the next step, its id from best_[cur_] on the device
    AppendOptions ao;
    ao.ids_from = best_[cur_];
    const ForwardOutputs o = session_.append({0}, ao);
    b.argmax(o.logits, best_[cur_ ^ 1]);
    reader_[cur_ ^ 1]->start(best_[cur_ ^ 1]);
  }
  const Token id = *static_cast<const Token*>(reader_[cur_]->wait());
  if (ahead) {
    session_.set_tokens(p, &id, 1);
    queued_ = true;
    queued_id_ = id;
    cur_ ^= 1;
  }
  return id;
}

GreedySteps::~GreedySteps() {
  try {
    if (queued_) reader_[cur_]->wait();
  } catch (...) {  // a device error: nothing left to wait for
  }
}

void GreedySteps::drop_queued() {
  if (!queued_) return;
  reader_[cur_]->wait();
  queued_ = false;
  if (session_.state().rewindable()) session_.rewind(session_.position() - 1);
}

}  // namespace df
