// The compute backend interface. Model code talks only to this: it never includes a CPU or
// CUDA header. A backend owns device memory and runs ops in order on its stream.
// Activations are row-major float32 matrices [rows, cols]: one row per token.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "quant/types.h"

namespace df {

// A view of device memory: a matrix of `rows` rows of `cols` elements of `type`, rows
// `stride` bytes apart (stride == row_bytes(type, cols) when dense).
struct Tensor {
  void* data = nullptr;  // null: an empty (absent) tensor
  GgmlType type = GgmlType::F32;
  int64_t cols = 0;
  int64_t rows = 0;
  size_t stride = 0;

  size_t nbytes() const { return stride * static_cast<size_t>(rows); }
  bool empty() const { return data == nullptr; }
  // Rows [r0, r0 + n) of this tensor.
  Tensor slice_rows(int64_t r0, int64_t n) const {
    Tensor t = *this;
    t.data = static_cast<uint8_t*>(data) + stride * static_cast<size_t>(r0);
    t.rows = n;
    return t;
  }
  // Columns [c0, c0 + n) of every row (a strided view; the type must have 1-element blocks).
  Tensor slice_cols(int64_t c0, int64_t n) const;
  // The same memory seen as rows of `new_cols` elements (dense tensors only).
  Tensor reshape(int64_t new_cols) const;
};

// Device memory owned by a backend; freed when the last owner lets go.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* data() = 0;
  virtual size_t size() const = 0;
};

enum class UnaryOp { SILU, SIGMOID, SOFTPLUS };

// One projection of Backend::norm_matmuls: y = W . xn, then an elementwise epilogue.
enum class Epilogue { NONE, SIGMOID, SOFTPLUS_SCALE };
struct Projection {
  Tensor W;            // [m, k] weight
  Tensor y;            // [n, m]
  Epilogue epi = Epilogue::NONE;
  Tensor bias{}, scale{};  // SOFTPLUS_SCALE: [1, m] f32 each
};

// A Gated DeltaNet mixer after its projections (Backend::delta_net_core; qwen35's
// delta_net_core): d = head_dim, Hk key heads, Hv = o.cols / d value heads, C = 2*Hk*d + Hv*d.
// qkv [n, C] (the projection; may be strided), conv [n, C] (scratch: q | k | v after the
// call), conv_w [C, K] f32, z [n, Hv*d], beta and g [n, Hv], norm [1, d] (ssm_norm), o [n, Hv*d].
struct DeltaNetCore {
  Tensor qkv, conv_w, conv, z, beta, g, norm, o;
  int64_t head_dim = 0, n_k_heads = 0;
  float eps = 0.0f;
};
// One sequence's rows [row0, row0 + n) of a delta_net_core call and its recurrent state:
// ssm_conv's state and snapshot slots, gated_delta_rule's (the snapshots may be empty).
struct DeltaNetSeq {
  int64_t row0 = 0, n = 0;
  Tensor conv_state, conv_snap, ssm_state, ssm_snap;
};

// The expert part of a MoE FFN block (Backend::moe_experts_residual; models/moe_ffn.h): the
// stacks, the shared expert (data null: none), and the activations. Inputs: logits [n, E]
// (the router's) and sh_g [n, 1] (the shared expert's sigmoid gate); the rest is scratch:
// ids [n, k] i32, weights [n, k], gate / up [n * k, m], down [n * k, dim], sh_gate / sh_up
// [n, m_sh], sh_out / out [n, dim].
struct MoeExperts {
  Tensor gate_exps, up_exps, down_exps;  // weight_stack()s of n_expert experts
  int64_t n_expert = 0;
  bool normalize = true;  // renormalise the routed weights (moe_route)
  float scale = 0.0f;
  Tensor shexp_gate, shexp_up, shexp_down;
  Tensor logits, sh_g;
  Tensor ids, weights, gate, up, down, sh_gate, sh_up, sh_out, out;
};

// A MoE block's routing forecast (Backend::moe_forecast): the block's expert stacks and
// router, and the residual stream x [n, dim] before the layer's mixer, which the block's
// router will see (rms_norm(x + mixer), norm) after it. xn [n, dim] and logits [n, n_expert]:
// scratch the backend may write (the mixer and the router overwrite them next).
// draft: a forecast made before the forward from the tokens of its rows alone (x: their
// embedding rows; Model::forecast_experts, called by speculative decoding with the verify's
// rows once the drafts are known), one per MoE block of the model at once; block: its index
// among the model's MoE blocks (0 first).
struct MoeForecast {
  Tensor gate_exps, up_exps, down_exps;  // weight_stack()s of n_expert experts
  int64_t n_expert = 0, n_used = 0;
  Tensor router;  // [n_expert, dim]
  Tensor norm;    // [1, dim] the block's input norm
  float eps = 0.0f;
  Tensor x, xn, logits;
  bool draft = false;
  int64_t block = 0;
};

// One attention layer's KV cache. Its layout is the backend's choice (the CPU backend keeps
// V transposed, [kv_dim, capacity], so the product with the probabilities is a dot over
// positions as in llama.cpp); model code only passes it back to kv_store / attention.
struct KvCache {
  Tensor k;               // backend layout
  Tensor v;               // backend layout
  int64_t n_ctx = 0;      // positions it holds
  int64_t kv_dim = 0;     // n_head_kv * head_dim
  GgmlType type = GgmlType::F16;
  std::vector<std::shared_ptr<Buffer>> buffers;
  uint64_t nbytes() const { return k.nbytes() + v.nbytes(); }
};

// Rotary embedding of a projection [n, n_head * head_dim]: NeoX rotation (pairs i and
// i + n_rot/2) of the first n_rot dims of each head. `sections` is ggml's multi-section table
// (IMROPE, interleaved): all zero means plain NeoX (every pair rotates with the token position
// p). Otherwise pair i falls in sector s = i % (sum of sections) and, for text, rotates with p
// when (s % 3 == 0 && s < 3 * sections[0]) || (s % 3 == 1 && s < 3 * sections[1]) ||
// (s % 3 == 2 && s < 3 * sections[2]), and with position 0 (no rotation) otherwise.
struct RopeParams {
  int32_t n_head = 0;
  int32_t head_dim = 0;
  int32_t n_rot = 0;
  float freq_base = 10000.0f;
  int32_t sections[4] = {0, 0, 0, 0};
};

struct AttentionParams {
  int32_t n_head = 0;     // query heads
  int32_t n_head_kv = 0;  // key/value heads (n_head % n_head_kv == 0)
  int32_t head_dim = 0;
  float scale = 1.0f;     // usually 1/sqrt(head_dim)
};

// A recorded sequence of ops (a CUDA graph), replayed by Backend::replay.
class OpGraph {
 public:
  virtual ~OpGraph() = default;
};

// A device-to-host copy that the host waits for later (decode lookahead): start() queues a
// copy of the first bytes of `src` (in stream order: after the work queued before it) into
// host memory the reader owns; wait() returns once they are there, with their address
// (valid until the next start()). Made by Backend::host_reader.
class HostReader {
 public:
  virtual ~HostReader() = default;
  virtual void start(const Tensor& src) = 0;
  virtual const void* wait() = 0;
};

// Rows [n * n_head, hd] of one half (part 0: query, 1: gate) of a dense [n, n_head * 2 * hd]
// projection whose heads hold [query | gate] (a strided view, no copy).
Tensor head_half(const Tensor& qg, int64_t n_head, int64_t hd, int64_t part);

class Backend;
// A dense tensor [rows, cols] in fresh memory of `b`; the buffer is appended to `owner`,
// which keeps it alive.
Tensor alloc_tensor(Backend& b, GgmlType type, int64_t cols, int64_t rows,
                    std::vector<std::shared_ptr<Buffer>>& owner);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Prefill rows per forward when the user sets none (EngineOptions::prefill_chunk 0): what
  // fills this backend's GEMM well without large activation buffers.
  virtual int64_t default_prefill_chunk() const { return 512; }

  // ---- memory ----
  virtual std::shared_ptr<Buffer> alloc(size_t bytes) = 0;
  // Makes a weight usable by ops. `host` stays valid for the backend's lifetime (mmap); a
  // backend may use it in place (CPU) or copy it to the device (CUDA).
  virtual Tensor weight(GgmlType type, int64_t cols, int64_t rows, const void* host) = 0;
  // A stack of n_expert matrices [rows, cols] one after another (a MoE FFN's ffn_*_exps),
  // used only by matmul_id. A device backend may keep it in host memory and bring the experts
  // a step routes to into a device cache; by default it is one weight of n_expert * rows rows.
  virtual Tensor weight_stack(GgmlType type, int64_t cols, int64_t rows, int64_t n_expert, const void* host) {
    return weight(type, cols, rows * n_expert, host);
  }
  // Rows [0, rows) of the weight W (made by weight() from `host`) as a weight of their own: an
  // MTP head's trimmed drafting vocabulary. The default is a view of W's rows (a backend whose
  // ops read weights as the file has them); a backend that repacks weights packs those rows.
  virtual Tensor weight_rows(const Tensor& W, int64_t rows, const void* host) {
    (void)host;
    return W.slice_rows(0, rows);
  }
  // A weight of `rows` rows of W's type and width whose rows may be replaced later, one at a
  // time, by weight_set_row (an MTP head's drafting vocabulary: output-projection rows of chosen
  // tokens); host_rows: its first contents, rows x W.stride bytes as the file has them (read now,
  // not kept). The default: dense memory of this backend (owned by `owner`) with the file's row
  // bytes, which a backend reading weights as the file has them (CPU: its planar kernels)
  // multiplies in place; a backend that repacks weights packs them (CUDA).
  virtual Tensor weight_slots(const Tensor& W, int64_t rows, const void* host_rows,
                              std::vector<std::shared_ptr<Buffer>>& owner);
  // Row `row` of a weight made by weight_slots becomes host_row (the file's bytes of one row).
  // In stream order (queued after the work before it); not inside a graph capture.
  virtual void weight_set_row(const Tensor& S, int64_t row, const void* host_row) {
    upload(S.slice_rows(row, 1), host_row, S.stride);
  }
  virtual void upload(const Tensor& dst, const void* src, size_t bytes) = 0;
  virtual void download(const Tensor& src, void* dst, size_t bytes) = 0;
  virtual void synchronize() = 0;
  // A reader of `bytes` bytes (HostReader). The default copies in start() (download).
  virtual std::unique_ptr<HostReader> host_reader(size_t bytes);
  // Whether ops return before the device has run them (CUDA: queued on a stream), so that
  // the host can queue the next step while the device runs this one.
  virtual bool asynchronous() const { return false; }
  // Graphs: record() runs `ops` and returns a graph that replays the same launches on the
  // same tensors (whose contents may change: per-token inputs live in device tensors), or
  // null where the backend has no graphs (the ops just ran). Nothing inside may allocate,
  // upload or download. replay() runs a recorded graph.
  virtual std::unique_ptr<OpGraph> record(const std::function<void()>& ops) {
    ops();
    return nullptr;
  }
  virtual void replay(OpGraph& g) {}
  // Called once before a model's weights are loaded with the bytes they take (a device
  // backend checks that they fit and allocates them in one piece; the CPU backend maps them).
  virtual void reserve_weights(uint64_t bytes) {}
  // Called before a model's weights are loaded for each file they come from: the weights'
  // host pointers in [base, base + size) are that file's bytes at the same offsets (its
  // mapping), so a backend may read them from the file instead (the CUDA backend's experts
  // with --expert-source file).
  virtual void weight_file(const std::string& path, const void* base, uint64_t size) {}
  // Whether the engine should read every page of the mapped file once after loading (the
  // CPU reads weights in place); false where the backend reads some weights from the file
  // itself when it needs them (then a prefault would read them all for nothing).
  virtual bool prefault_weights() const { return true; }

  // ---- execution mode ----
  // Row-exact mode (on by default): every op computes each row of a call of up to the
  // backend's verify size (CPU: CpuOptions::exact_rows) with the same bits as a one-row call
  // would, so that decode and speculative verify agree bit for bit. Off (prompt prefill):
  // multi-row calls may use multi-row kernels with another summation order (as llama.cpp's
  // batched path does). The model sets it per forward from ForwardOptions::row_exact.
  virtual void set_row_exact(bool on) {}

  // ---- ops ----  (shapes: x [n, k] means n rows of k floats)
  // Per-token inputs are I32 device tensors [n, 1] (one value per row): `ids` (token ids)
  // and `pos` (positions). No op allocates or waits for the device; `download` is the only
  // host read of device data.
  //
  // out[i] = table row ids[i] (any weight type, dequantized; an f32 activation tensor works
  // too) -> out [n, dim]  (ids [n, 1] i32)
  virtual void get_rows(const Tensor& table, const Tensor& ids, const Tensor& out) = 0;
  // y[r] = x[r] / rms(x[r]) * w  (x [n, k], w [1, k] f32); x may equal y
  virtual void rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& y) = 0;
  // y [n, m] = x [n, k] * W^T with W [m, k] of any supported type
  virtual void matmul(const Tensor& W, const Tensor& x, const Tensor& y) = 0;
  // In place rotary embedding (RopeParams) of x [n, n_head * head_dim]; row r at position
  // pos[r] (pos [n, 1] i32). Rows may belong to different sequences.
  virtual void rope(const Tensor& x, const Tensor& pos, const RopeParams& p) = 0;
  // A KV cache for n_ctx positions of kv_dim values each, of type F16 or F32.
  virtual KvCache alloc_kv_cache(int64_t n_ctx, int64_t kv_dim, GgmlType type) = 0;
  // Stores k and v rows [n, kv_dim]: row r at cache position pos[r] (pos [n, 1] i32).
  virtual void kv_store(KvCache& cache, const Tensor& k, const Tensor& v, const Tensor& pos) = 0;
  // Causal attention of q [n, n_head * head_dim]: row r (at position pos[r]) attends cache
  // positions [0, pos[r]] -> out [n, n_head * head_dim]. All rows belong to one sequence,
  // positions ascending.
  virtual void attention(const Tensor& q, const KvCache& cache, const Tensor& pos, const AttentionParams& p,
                         const Tensor& out) = 0;
  // out[r] = index of the largest of logits[r] (lowest index on ties)  (logits [n, V] f32,
  // out [n, 1] i32): greedy decoding without downloading the logits.
  virtual void argmax(const Tensor& logits, const Tensor& out) = 0;
  // out[r] = ids[argmax(logits[r])] (ids [V, 1] i32: a logits column's token id; the lowest
  // column on ties): an MTP head's drafts over its slots, on the device.
  virtual void argmax_ids(const Tensor& logits, const Tensor& ids, const Tensor& out) = 0;
  // out = silu(gate) * up  (all [n, k])
  virtual void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;
  // x += y  (both [n, k])
  virtual void add(const Tensor& x, const Tensor& y) = 0;
  // dst rows = src rows (same shape and type)
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;
  // copy(p.src, p.dst) for every pair, in order. No pair's destination may overlap another
  // pair's source or destination (a backend may run the copies together, in one launch).
  struct CopyPair {
    Tensor src, dst;
  };
  virtual void copy_batch(std::span<const CopyPair> pairs);

  // ---- fused ops ----
  // Each one's default implementation runs exactly the ops its comment names, in that order:
  // a backend that does not override them (the CPU one) computes the same bits as those ops.
  // A backend may do them in fewer launches and passes (within its op tests' budgets, and
  // keeping row-exact mode's guarantee). Scratch tensors named below may be left unwritten.
  //
  // rms_norm(x, norm, eps, xn); then per projection matmul(W, xn, y) and its epilogue
  // (SIGMOID: unary(SIGMOID, y, y); SOFTPLUS_SCALE: softplus_scale(y, bias, scale, y)).
  // x, xn [n, k] (xn: scratch).
  virtual void norm_matmuls(const Tensor& x, const Tensor& norm, float eps, const Tensor& xn,
                            std::span<const Projection> proj);
  // rms_norm(x, norm, eps, xn); matmul(Wg, xn, gate); matmul(Wu, xn, up); swiglu(gate, up, gate):
  // gate [n, m] = silu(Wg . xn) * (Wu . xn)  (xn [n, k], up [n, m]: scratch).
  virtual void norm_swiglu(const Tensor& x, const Tensor& norm, float eps, const Tensor& xn, const Tensor& Wg,
                           const Tensor& Wu, const Tensor& gate, const Tensor& up);
  // matmul(W, x, tmp); add(acc, tmp): acc [n, m] += W . x  (tmp [n, m]: scratch).
  virtual void matmul_add(const Tensor& W, const Tensor& x, const Tensor& tmp, const Tensor& acc);
  // Per-head rms_norm of q (weight q_norm) and k (k_norm) in place (rows of head_dim),
  // rope(q, pos, rq), rope(k, pos, rk); then, when cache is not null, kv_store(*cache, k, v, pos).
  // q [n, rq.n_head * hd], k and v [n, rk.n_head * hd].
  virtual void qk_norm_rope(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                            const Tensor& k_norm, float eps, const Tensor& pos, const RopeParams& rq,
                            const RopeParams& rk, KvCache* cache);
  // qk_norm_rope(q, k, v, q_norm, k_norm, eps, pos, rq, rk, &cache); attention(q, cache, pos, p, out):
  // the rows of one sequence (positions ascending). q and k: scratch.
  virtual void qk_norm_rope_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                                      const Tensor& k_norm, float eps, const Tensor& pos, const RopeParams& rq,
                                      const RopeParams& rk, KvCache& cache, const AttentionParams& p,
                                      const Tensor& out);
  // qwen35's gated attention of one sequence after its projections: qg [n, n_head * 2 * hd]
  // holds each head's [query | gate]. copy_batch of qg's halves into q and gate (scratch, [n,
  // n_head * hd]: head_half), qk_norm_rope_attention(q, k, v, ..., out), sigmoid_mul(gate, out, out).
  virtual void gated_qk_norm_rope_attention(const Tensor& qg, const Tensor& q, const Tensor& gate, const Tensor& k,
                                            const Tensor& v, const Tensor& q_norm, const Tensor& k_norm, float eps,
                                            const Tensor& pos, const RopeParams& rq, const RopeParams& rk,
                                            KvCache& cache, const AttentionParams& p, const Tensor& out);

  // The Gated DeltaNet mixer's recurrent core (DeltaNetCore), rows of sequence s as
  // x.slice_rows(s.row0, s.n), q | k | v = conv's columns [0, Hk*d) | [Hk*d, 2*Hk*d) | [2*Hk*d, C):
  //   per s: ssm_conv(qkv rows, s.conv_state, conv_w, conv rows, s.conv_snap);
  //   unary(SILU, conv, conv); l2_norm(q | k, d, eps, q | k)  (one call over both);
  //   per s: gated_delta_rule(q, k, v, g, beta rows, s.ssm_state, 1 / sqrt(d), o rows, s.ssm_snap);
  //   rms_norm(o.reshape(d), norm, eps, o.reshape(d))  (per value head); swiglu(z, o, o).
  virtual void delta_net_core(const DeltaNetCore& a, std::span<const DeltaNetSeq> seqs);

  // ---- ops of recurrent (linear attention) layers and gates ----
  // Elementwise y = f(x) over [n, k] f32 tensors (x may equal y).
  virtual void unary(UnaryOp op, const Tensor& x, const Tensor& y) = 0;
  // out = sigmoid(gate) * x  (all [n, k]; out may alias either input)
  virtual void sigmoid_mul(const Tensor& gate, const Tensor& x, const Tensor& out) = 0;
  // out[r][h] = softplus(x[r][h] + bias[h]) * scale[h]  (x, out [n, H]; bias, scale [1, H] f32)
  virtual void softplus_scale(const Tensor& x, const Tensor& bias, const Tensor& scale,
                              const Tensor& out) = 0;
  // L2 normalisation of every group of `group` consecutive elements of each row:
  // y = x / max(|x|, eps)  (x, y [n, G * group], may be strided column views; x may equal y)
  virtual void l2_norm(const Tensor& x, int64_t group, float eps, const Tensor& y) = 0;
  // Causal depthwise convolution over time with a carried state, channel c:
  //   window = [state rows 0..K-2, x rows 0..n-1] (column c);  y[t][c] = sum_i window[t+i][c] * w[c][i]
  // x [n, C] (may be a strided view), state [K-1, C] f32 (in: the K-1 inputs before x[0];
  // out: the last K-1 rows of the window), w [C, K] f32 (GGUF ssm_conv1d), y [n, C] (not x).
  // snapshots: empty (data == nullptr), or [m * (K-1), C] f32 with m slots of K-1 rows: slot t
  // receives the state after row t, for t < min(n, m) (rollback without replay).
  virtual void ssm_conv(const Tensor& x, const Tensor& state, const Tensor& w, const Tensor& y,
                        const Tensor& snapshots) = 0;
  // Gated delta rule (Gated DeltaNet), token by token. Per value head h (key head h % Hk, the
  // tiled order of GGUF files) with state S_h [d rows (value dim j), d cols (key dim i)]:
  //   S_h *= exp(g[t][h]);  delta_j = (v_j - S_h[j] . k) * beta[t][h];  S_h[j] += delta_j * k;
  //   out[t][h*d + j] = (S_h[j] . q) * scale
  // q, k [n, Hk * d] and v [n, Hv * d] (strided views allowed), g, beta [n, Hv],
  // state [Hv * d, d] f32 (in/out), out [n, Hv * d]; Hv % Hk == 0.
  // snapshots: empty, or [m * Hv * d, d] f32 with m slots shaped like `state`: slot t receives
  // the state after row t, for t < min(n, m).
  virtual void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                const Tensor& beta, const Tensor& state, float scale,
                                const Tensor& out, const Tensor& snapshots) = 0;

  // ---- ops of mixture-of-experts FFNs (llama.cpp build_moe_ffn, softmax gating) ----
  // Router: p = softmax(logits[r]) over the E experts; ids[r] = the k = ids.cols experts of
  // largest p in decreasing order (the lower index first on equal p); weights[r][j] =
  // p[ids[r][j]], divided by their sum (clamped below at 2^-14) when `normalize`, then
  // multiplied by `scale` unless scale is 0 or 1.
  // logits [n, E] f32, ids [n, k] i32, weights [n, k] f32 (k <= E).
  virtual void moe_route(const Tensor& logits, bool normalize, float scale, const Tensor& ids,
                         const Tensor& weights) = 0;
  // Grouped product over the experts of a batch: W holds n_expert matrices [m, cols] one after
  // another (W.rows = n_expert * m; GGUF ffn_*_exps ne = {cols, m, n_expert}). For row r and
  // slot j (k = ids.cols slots):  y[r * k + j] = W[ids[r][j]] . x[r]      (x [n, cols])
  //                           or  y[r * k + j] = W[ids[r][j]] . x[r * k + j]  (x [n * k, cols])
  // y [n * k, m]. Each expert's weights are read once for all the rows routed to it, and each
  // result equals the dense matmul of that expert and row.
  virtual void matmul_id(const Tensor& W, int64_t n_expert, const Tensor& x, const Tensor& ids,
                         const Tensor& y) = 0;
  // Fused (as the fused ops above): matmul_id(Wu, n_expert, x, ids, up); matmul_id(Wg, n_expert,
  // x, ids, gate); swiglu(gate, up, gate): gate [n * k, m] = silu(Wg[e] . x) * (Wu[e] . x) per slot
  // (up [n * k, m]: scratch).
  virtual void matmul_id_swiglu(const Tensor& Wg, const Tensor& Wu, int64_t n_expert, const Tensor& x,
                                const Tensor& ids, const Tensor& gate, const Tensor& up);
  // out[r] = sum_j weights[r][j] * experts[r * k + j] (added in slot order, as ggml's chain of
  // adds) [+ shared[r] * gate[r][0]]: experts [n * k, d], weights [n, k], out [n, d]; shared
  // [n, d] and gate [n, 1] (the shared expert and its sigmoid gate) are optional (data null).
  virtual void moe_combine(const Tensor& experts, const Tensor& weights, const Tensor& shared,
                           const Tensor& gate, const Tensor& out) = 0;
  // Fused: moe_combine(experts, weights, shared, gate, out); add(x, out) (x [n, d] += the MoE
  // output; out: scratch that a fused backend need not write).
  // A MoE block after its router (x [n, dim] += the experts; xn [n, dim] scratch):
  //   rms_norm(x, norm, eps, xn); moe_route(logits, normalize, scale, ids, weights);
  //   moe_experts_routed(m) (a hint); matmul_id_swiglu(gate_exps, up_exps, E, xn, ids, gate, up); matmul_id(down_exps, E, gate,
  //   ids, down); with a shared expert norm_swiglu(x, norm, eps, xn, shexp_gate, shexp_up,
  //   sh_gate, sh_up) and matmul(shexp_down, sh_gate, sh_out); moe_combine_add(down, weights,
  //   sh_out | none, sh_g | none, out, x). A fused backend may leave the scratch unwritten.
  virtual void moe_experts_residual(const MoeExperts& m, const Tensor& x, const Tensor& norm, float eps,
                                    const Tensor& xn);
  // A hint, called by moe_experts_residual's default right after moe_route wrote m.ids: the
  // products that follow read the experts of m.ids (all rows) in m.gate_exps, m.up_exps and
  // m.down_exps, so a backend may start bringing them in now (the CPU backend advises the
  // missing pages of stacks on the file's mapped pages: CpuOptions::expert_prefetch). No
  // result changes. Default: nothing.
  virtual void moe_experts_routed(const MoeExperts& m) {}
  // A hint at the start of a MoE layer, before its mixer (MoeForecast): a backend that brings
  // experts in from slow memory may predict the block's routing from x and start reading the
  // predicted experts while the mixer runs. Changes no result; the default does nothing.
  virtual void moe_forecast(const MoeForecast& f) {}
  // Whether moe_forecast acts on forecasts of this kind (MoeForecast::draft): a model skips
  // the work of making one otherwise. Default: no.
  virtual bool wants_moe_forecast(bool draft) const { return false; }
  virtual void moe_combine_add(const Tensor& experts, const Tensor& weights, const Tensor& shared,
                               const Tensor& gate, const Tensor& out, const Tensor& x);

 protected:
  // moe_combine's contract above (types and shapes), for every backend; throws df::Error.
  static void check_moe_combine(const Tensor& experts, const Tensor& weights, const Tensor& shared,
                                const Tensor& gate, const Tensor& out);
};

}  // namespace df
