// GGUF reader: memory-maps a file (or takes a buffer) and validates every structure before
// trusting it. Every count read from the file is checked against the bytes that remain before
// anything is allocated, so a corrupt or hostile file fails fast with a df::Error that names
// the problem instead of allocating gigabytes or reading past the end.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <utility>

#include "common/error.h"
#include "gguf/gguf.h"

namespace df::gguf {

static_assert(std::endian::native == std::endian::little, "GGUF reader assumes a little-endian host");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr int kMaxArrayDepth = 8;        // nested arrays deeper than this are rejected
// Smallest encodings, used to bound counts before allocating:
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;       // key length, 1-byte key, type, 1-byte value
constexpr uint64_t kMinTensorBytes = 8 + 4 + 8 + 4 + 8;  // name length, n_dims, 1 dim, type, offset

std::string where(const std::string& path) {
  return path.empty() ? std::string("GGUF buffer: ") : "GGUF file '" + path + "': ";
}

std::string shape_string(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

// Sequential little-endian reader over [data, data + size) with bounds checks.
class Parser {
 public:
  // [data, data + avail) holds the first avail of the file's size bytes (avail < size only
  // when parsing a header prefix: reads past avail then throw HeaderTruncated).
  Parser(const uint8_t* data, size_t avail, size_t size, const std::string& path)
      : data_(data), avail_(avail), size_(size), path_(path) {}

  [[noreturn]] void fail(const std::string& msg) const { throw Error(where(path_) + msg); }
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  void set_context(std::string c) { context_ = std::move(c); }

  // Returns a pointer to the next n bytes and advances past them.
  const uint8_t* take(uint64_t n, const char* what) {
    if (n > remaining())
      fail("truncated file: reading " + std::string(what) +
           (context_.empty() ? "" : " of " + context_) + " at offset " + std::to_string(pos_) +
           " needs " + std::to_string(n) + " bytes, only " + std::to_string(remaining()) +
           " remain");
    if (n > avail_ - pos_)
      throw HeaderTruncated(where(path_) + "the header needs more than the " + std::to_string(avail_) +
                                " bytes given",
                            pos_ + n);
    const uint8_t* p = data_ + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  template <class T>
  T read(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }
  std::string read_string(const char* what) {
    const uint64_t n = read<uint64_t>(what);
    if (n > remaining())
      fail("truncated file or corrupt length: " + std::string(what) +
           (context_.empty() ? "" : " of " + context_) + " has string length " +
           std::to_string(n) + " but only " + std::to_string(remaining()) + " bytes remain");
    const auto* p = reinterpret_cast<const char*>(take(n, what));
    return std::string(p, static_cast<size_t>(n));
  }

  Value read_scalar(ValueType t, const std::string& key);
  Value read_array(const std::string& key, int depth);

 private:
  const uint8_t* data_;
  size_t avail_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
  std::string context_;  // what is being read, for truncation messages ("key 'x'")
};

Value Parser::read_scalar(ValueType t, const std::string& key) {
  Value v;
  v.type = t;
  switch (t) {
    case ValueType::UINT8: v.v = uint64_t{read<uint8_t>("value")}; break;
    case ValueType::INT8: v.v = int64_t{read<int8_t>("value")}; break;
    case ValueType::UINT16: v.v = uint64_t{read<uint16_t>("value")}; break;
    case ValueType::INT16: v.v = int64_t{read<int16_t>("value")}; break;
    case ValueType::UINT32: v.v = uint64_t{read<uint32_t>("value")}; break;
    case ValueType::INT32: v.v = int64_t{read<int32_t>("value")}; break;
    case ValueType::UINT64: v.v = read<uint64_t>("value"); break;
    case ValueType::INT64: v.v = read<int64_t>("value"); break;
    case ValueType::FLOAT32: v.v = double{read<float>("value")}; break;
    case ValueType::FLOAT64: v.v = read<double>("value"); break;
    case ValueType::BOOL: v.v = read<uint8_t>("value") != 0; break;
    case ValueType::STRING: v.v = read_string("value"); break;
    case ValueType::ARRAY: v = read_array(key, 1); break;
  }
  return v;
}

// Reads n elements of the array alternative I (its index is the element's ValueType id).
template <size_t I>
Array read_elements(Parser& p, uint64_t n, const std::string& key, int depth) {
  using Vec = std::variant_alternative_t<I, Array>;
  using T = typename Vec::value_type;
  Vec out;
  if constexpr (std::is_same_v<T, bool>) {
    const uint8_t* src = p.take(n, "bool array");
    out.resize(static_cast<size_t>(n));
    for (size_t i = 0; i < out.size(); ++i) out[i] = src[i] != 0;
  } else if constexpr (std::is_same_v<T, std::string>) {
    out.reserve(static_cast<size_t>(n));
    for (uint64_t i = 0; i < n; ++i) out.push_back(p.read_string("array string"));
  } else if constexpr (std::is_same_v<T, Value>) {
    out.reserve(static_cast<size_t>(n));
    for (uint64_t i = 0; i < n; ++i) out.push_back(p.read_array(key, depth + 1));
  } else {
    const uint8_t* src = p.take(n * sizeof(T), "array data");  // n was bounded by the caller
    out.resize(static_cast<size_t>(n));
    if (n) std::memcpy(out.data(), src, static_cast<size_t>(n) * sizeof(T));
  }
  return Array(std::in_place_index<I>, std::move(out));
}

using ElementReader = Array (*)(Parser&, uint64_t, const std::string&, int);
template <size_t... I>
constexpr std::array<ElementReader, sizeof...(I)> element_readers(std::index_sequence<I...>) {
  return {&read_elements<I>...};
}
constexpr auto kElementReaders = element_readers(std::make_index_sequence<13>{});

Value Parser::read_array(const std::string& key, int depth) {
  if (depth > kMaxArrayDepth)
    fail("key '" + key + "' has arrays nested deeper than " + std::to_string(kMaxArrayDepth));
  const uint32_t et = read<uint32_t>("array element type");
  if (!value_type_valid(et))
    fail("key '" + key + "' has an array of unknown value type " + std::to_string(et));
  const uint64_t n = read<uint64_t>("array length");
  const auto elem = static_cast<ValueType>(et);
  const uint64_t min_bytes = elem == ValueType::STRING ? 8
                             : elem == ValueType::ARRAY ? 12
                                                        : value_type_size(elem);
  if (n > remaining() / min_bytes)
    fail("key '" + key + "' has array length " + std::to_string(n) + " of " +
         std::string(value_type_name(elem)) + ", which cannot fit in the remaining " +
         std::to_string(remaining()) + " bytes");
  Value v;
  v.type = ValueType::ARRAY;
  v.array_type = elem;
  v.v = std::make_shared<Array>(kElementReaders[et](*this, n, key, depth));
  return v;
}

}  // namespace

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

std::unique_ptr<File> File::open(const std::string& path) {
  std::unique_ptr<File> f(new File());
  f->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open GGUF file '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error("cannot stat GGUF file '" + path + "': " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("GGUF file '" + path + "' is not a regular file");
  }
  f->size_ = f->avail_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int e = errno;
    ::close(fd);
    if (m == MAP_FAILED) throw Error("cannot map GGUF file '" + path + "': " + std::strerror(e));
    f->mapping_ = m;
    f->base_ = static_cast<const uint8_t*>(m);
  } else {
    ::close(fd);
  }
  f->parse();
  return f;
}

std::unique_ptr<File> File::from_memory(const uint8_t* data, size_t size) {
  std::unique_ptr<File> f(new File());
  f->base_ = data;
  f->size_ = f->avail_ = size;
  f->parse();
  return f;
}

std::unique_ptr<File> File::header_from_memory(const uint8_t* data, size_t size, uint64_t file_size) {
  if (size > file_size)
    throw Error("GGUF header: a prefix of " + std::to_string(size) + " bytes is longer than the file (" +
                std::to_string(file_size) + " bytes)");
  std::unique_ptr<File> f(new File());
  f->base_ = data;
  f->avail_ = size;
  f->size_ = static_cast<size_t>(file_size);
  f->header_only_ = true;
  f->parse();
  return f;
}

void File::no_data(const TensorInfo& t) {
  throw Error("tensor '" + t.name + "': this GGUF File was parsed from a header only and holds no tensor data");
}

File::~File() {
  if (mapping_) ::munmap(mapping_, avail_);
}

void File::parse() {
  Parser p(base_, avail_, size_, path_);

  // ---- header: magic, version, counts ----
  p.set_context("the header");
  const uint32_t magic = p.read<uint32_t>("magic");
  if (magic != kMagic) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "%08x", __builtin_bswap32(magic));
    p.fail("bad magic: expected 'GGUF' (47475546), found " + std::string(hex));
  }
  version_ = p.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3) {
    const uint32_t swapped = __builtin_bswap32(version_);
    p.fail("unsupported GGUF version " + std::to_string(version_) +
           (swapped == 2 || swapped == 3 ? " (big-endian files are not supported)"
                                         : " (supported: 2 and 3)"));
  }
  const uint64_t n_tensors = p.read<uint64_t>("tensor count");
  const uint64_t n_kv = p.read<uint64_t>("key-value count");
  if (n_kv > p.remaining() / kMinKvBytes)
    p.fail("n_kv = " + std::to_string(n_kv) + " key-value pairs cannot fit in the remaining " +
           std::to_string(p.remaining()) + " bytes");
  if (n_tensors > p.remaining() / kMinTensorBytes)
    p.fail("n_tensors = " + std::to_string(n_tensors) + " tensor infos cannot fit in the remaining " +
           std::to_string(p.remaining()) + " bytes");

  // ---- metadata ----
  kv_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    p.set_context("key-value pair " + std::to_string(i));
    std::string key = p.read_string("key");
    if (key.empty()) p.fail("key-value pair " + std::to_string(i) + " has an empty key");
    p.set_context("key '" + key + "'");
    if (kv_index_.count(key)) p.fail("duplicate key '" + key + "'");
    const uint32_t t = p.read<uint32_t>("value type");
    if (!value_type_valid(t))
      p.fail("key '" + key + "' has unknown value type " + std::to_string(t));
    Value v = p.read_scalar(static_cast<ValueType>(t), key);
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const Value* a = find("general.alignment")) {
    if (a->type != ValueType::UINT32)
      p.fail("key 'general.alignment' must be uint32, found " +
             std::string(value_type_name(a->type)));
    alignment_ = std::get<uint64_t>(a->v);
    if (alignment_ == 0 || !std::has_single_bit(alignment_))
      p.fail("general.alignment = " + std::to_string(alignment_) +
             " is not a non-zero power of two");
  }

  // ---- tensor infos ----
  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    p.set_context("tensor info " + std::to_string(i));
    TensorInfo t;
    t.name = p.read_string("tensor name");
    const std::string tn = "tensor '" + t.name + "'";
    p.set_context(tn);
    if (tensor_index_.count(t.name)) p.fail("duplicate tensor name '" + t.name + "'");
    const uint32_t n_dims = p.read<uint32_t>("n_dims");
    if (n_dims < 1 || n_dims > 4)
      p.fail(tn + " has n_dims = " + std::to_string(n_dims) + ", must be 1..4");
    t.ne.resize(n_dims);
    int64_t n_elem = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      t.ne[d] = p.read<int64_t>("dimension");
      if (t.ne[d] <= 0)
        p.fail(tn + " dimension " + std::to_string(d) + " is " + std::to_string(t.ne[d]) +
               ", must be positive");
      if (__builtin_mul_overflow(n_elem, t.ne[d], &n_elem))
        p.fail(tn + " shape " + shape_string(t.ne) + " overflows the int64 element count");
    }
    const uint32_t type_id = p.read<uint32_t>("type");
    const auto ti = type_info(type_id);
    if (!ti) p.fail(tn + " has unknown type id " + std::to_string(type_id));
    t.type = static_cast<GgmlType>(type_id);
    if (t.ne[0] % ti->block_elems != 0)
      p.fail(tn + " row of " + std::to_string(t.ne[0]) + " elements is not a multiple of the " +
             std::string(ti->name) + " block size " + std::to_string(ti->block_elems));
    if (__builtin_mul_overflow(static_cast<uint64_t>(n_elem / ti->block_elems),
                               static_cast<uint64_t>(ti->block_bytes), &t.nbytes))
      p.fail(tn + " shape " + shape_string(t.ne) + " overflows its size in bytes");
    t.offset = p.read<uint64_t>("data offset");
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // ---- data section: starts at the next multiple of the alignment ----
  data_offset_ = (p.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors == 0) {  // nothing follows; writers still pad, but a file may end here
    data_offset_ = std::min<uint64_t>(data_offset_, size_);
    return;
  }
  if (data_offset_ > size_)
    p.fail("truncated file: the data section starts at offset " + std::to_string(data_offset_) +
           ", past the end of the file (" + std::to_string(size_) + " bytes)");
  const uint64_t data_size = size_ - data_offset_;
  for (const TensorInfo& t : tensors_) {
    if (t.offset % alignment_ != 0)
      p.fail("tensor '" + t.name + "' offset " + std::to_string(t.offset) +
             " is not a multiple of the alignment " + std::to_string(alignment_));
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      p.fail("tensor '" + t.name + "' data (" + std::to_string(t.nbytes) + " bytes at data offset " +
             std::to_string(t.offset) + ") extends past the end of the file (" +
             std::to_string(data_size) + " data bytes)");
  }
  // Overlap check: sorted by offset, each tensor must end before the next begins.
  std::vector<size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const TensorInfo& a = tensors_[order[i - 1]];
    const TensorInfo& b = tensors_[order[i]];
    if (a.offset + a.nbytes > b.offset)
      p.fail("tensors '" + a.name + "' and '" + b.name + "' overlap in the data section");
  }
}

// ---- lookups and typed getters ----

const Value* File::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

namespace {
const Value& require(const File& f, std::string_view key) {
  const Value* v = f.find(key);
  if (!v) throw Error(where(f.path()) + "missing required key '" + std::string(key) + "'");
  return *v;
}
}  // namespace

uint64_t File::get_u64(std::string_view key) const { return require(*this, key).as_u64(key); }
double File::get_f64(std::string_view key) const { return require(*this, key).as_f64(key); }
bool File::get_bool(std::string_view key) const { return require(*this, key).as_bool(key); }
const std::string& File::get_string(std::string_view key) const {
  return require(*this, key).as_string(key);
}
std::vector<std::string> File::get_string_array(std::string_view key) const {
  const Value& v = require(*this, key);
  const auto* s = std::get_if<std::vector<std::string>>(&v.as_array(key));
  if (!s)
    throw Error(where(path_) + "key '" + std::string(key) + "' is an array of " +
                std::string(value_type_name(v.array_type)) + ", expected an array of string");
  return *s;
}

uint64_t File::get_u64(std::string_view key, uint64_t fallback) const {
  const Value* v = find(key);
  return v ? v->as_u64(key) : fallback;
}
double File::get_f64(std::string_view key, double fallback) const {
  const Value* v = find(key);
  return v ? v->as_f64(key) : fallback;
}
bool File::get_bool(std::string_view key, bool fallback) const {
  const Value* v = find(key);
  return v ? v->as_bool(key) : fallback;
}
std::string File::get_string(std::string_view key, const std::string& fallback) const {
  const Value* v = find(key);
  return v ? v->as_string(key) : fallback;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& File::tensor(std::string_view name) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) throw Error(where(path_) + "missing tensor '" + std::string(name) + "'");
  return *t;
}

}  // namespace df::gguf
