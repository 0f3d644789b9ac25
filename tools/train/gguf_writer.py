"""A small GGUF v3 writer (and reader, for tests) written for diskformer's training tool.

Only what the trained model needs: scalar and array metadata, F32 / F16 / Q8_0 tensors.
Tensor data is handed over as a flat sequence of float32 values in row-major order of the
PyTorch shape; the GGUF shape (ggml's ne[]) is that shape reversed (ne[0] is the fastest
dimension, i.e. the last PyTorch dimension).

Q8_0 follows ggml's quantize_row_q8_0_ref exactly: per block of 32 values,
  amax = max |x|,  d = amax / 127 (float32),  id = d ? 1/d : 0 (float32),
  q = roundf(x * id) (round half away from zero),  d stored as fp16 (round to nearest even).
Two implementations: numpy (fast, used where numpy exists) and pure Python (used where it
does not, e.g. on the machine without numpy); tests check they are bit-identical.
"""
from __future__ import annotations

import array
import math
import struct
import sys

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

# gguf value types
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, \
    T_UINT64, T_INT64, T_FLOAT64 = range(13)

# ggml tensor types
GGML_F32 = 0
GGML_F16 = 1
GGML_Q8_0 = 8
QK8_0 = 32
TYPE_NAMES = {GGML_F32: "F32", GGML_F16: "F16", GGML_Q8_0: "Q8_0"}

_SCALAR_FMT = {
    T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h", T_UINT32: "<I", T_INT32: "<i",
    T_FLOAT32: "<f", T_BOOL: "<?", T_UINT64: "<Q", T_INT64: "<q", T_FLOAT64: "<d",
}

try:  # numpy is optional
    import numpy as _np
except ImportError:  # pragma: no cover - depends on the machine
    _np = None


def _f32(x: float) -> float:
    """Rounds a Python float (double) to the nearest float32 value."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _roundf(x: float) -> int:
    """C roundf: round half away from zero (x is an exact float32 value held in a double)."""
    r = math.floor(abs(x) + 0.5)  # exact in double for |x| < 2^29
    return int(r) if x >= 0 else -int(r)


def quantize_q8_0_py(values) -> bytes:
    """values: flat sequence of float32 values (array('f') or list), len % 32 == 0."""
    vals = values if isinstance(values, array.array) and values.typecode == "f" else array.array("f", values)
    n = len(vals)
    if n % QK8_0:
        raise ValueError(f"Q8_0 needs a multiple of {QK8_0} values, got {n}")
    out = bytearray()
    pack_d = struct.Struct("<e").pack
    for i in range(0, n, QK8_0):
        blk = vals[i:i + QK8_0]
        amax = 0.0
        for v in blk:
            a = abs(v)
            if a > amax:
                amax = a
        # float32 division done in double then rounded: correctly rounded (53 >= 2*24+2).
        d = _f32(amax / 127.0)
        idv = _f32(1.0 / d) if d != 0.0 else 0.0
        out += pack_d(d)
        out += struct.pack("<32b", *[_roundf(_f32(v * idv)) for v in blk])
    return bytes(out)


def quantize_q8_0_np(values) -> bytes:
    """numpy version of quantize_q8_0_py; bit-identical."""
    x = _np.ascontiguousarray(values, dtype=_np.float32).reshape(-1, QK8_0)
    amax = _np.abs(x).max(axis=1)
    d = (amax / _np.float32(127.0)).astype(_np.float32)
    safe = _np.where(d != 0, d, _np.float32(1.0)).astype(_np.float32)
    idv = _np.where(d != 0, _np.float32(1.0) / safe, _np.float32(0.0)).astype(_np.float32)
    x0 = (x * idv[:, None]).astype(_np.float32)
    q = _np.floor(_np.abs(x0).astype(_np.float64) + 0.5) * _np.sign(x0)
    blocks = _np.zeros(x.shape[0], dtype=[("d", "<f2"), ("qs", "i1", (QK8_0,))])
    blocks["d"] = d.astype(_np.float16)
    blocks["qs"] = q.astype(_np.int8)
    return blocks.tobytes()


def quantize_q8_0(values) -> bytes:
    if _np is not None:
        return quantize_q8_0_np(values)
    return quantize_q8_0_py(values)


def dequantize_q8_0(data: bytes) -> list:
    """Pure Python dequantisation (float32 values as Python floats): x = d * q."""
    out = []
    for off in range(0, len(data), 34):
        d = struct.unpack_from("<e", data, off)[0]
        qs = struct.unpack_from("<32b", data, off + 2)
        out.extend(_f32(d * q) for q in qs)
    return out


def _f32_bytes(values) -> bytes:
    if _np is not None and not isinstance(values, (list, array.array)):
        return _np.ascontiguousarray(values, dtype="<f4").tobytes()
    a = values if isinstance(values, array.array) and values.typecode == "f" else array.array("f", values)
    if sys.byteorder != "little":  # pragma: no cover
        a = array.array("f", a)
        a.byteswap()
    return a.tobytes()


def _f16_bytes(values) -> bytes:
    if _np is not None and not isinstance(values, (list, array.array)):
        return _np.ascontiguousarray(values, dtype=_np.float32).astype("<f2").tobytes()
    return b"".join(struct.pack("<e", float(v)) for v in values)


class GGUFWriter:
    """Collects metadata and tensors, then writes one GGUF v3 file."""

    def __init__(self) -> None:
        self._kv: list[tuple[str, int, object, int | None]] = []
        self._keys: set[str] = set()
        self._tensors: list[tuple[str, list[int], int, bytes]] = []
        self._names: set[str] = set()

    # ---- metadata
    def _add(self, key: str, vtype: int, value, elem_type: int | None = None) -> None:
        if key in self._keys:
            raise ValueError(f"duplicate GGUF key '{key}'")
        self._keys.add(key)
        self._kv.append((key, vtype, value, elem_type))

    def add_uint32(self, key: str, v: int) -> None: self._add(key, T_UINT32, int(v))
    def add_int32(self, key: str, v: int) -> None: self._add(key, T_INT32, int(v))
    def add_float32(self, key: str, v: float) -> None: self._add(key, T_FLOAT32, float(v))
    def add_bool(self, key: str, v: bool) -> None: self._add(key, T_BOOL, bool(v))
    def add_string(self, key: str, v: str) -> None: self._add(key, T_STRING, str(v))

    def add_array(self, key: str, elem_type: int, values) -> None:
        self._add(key, T_ARRAY, list(values), elem_type)

    # ---- tensors
    def add_tensor(self, name: str, torch_shape, values, ggml_type: int) -> None:
        """torch_shape: PyTorch (row-major) shape; values: flat float32 values in that order."""
        if name in self._names:
            raise ValueError(f"duplicate tensor '{name}'")
        if len(name.encode()) >= 64:
            raise ValueError(f"tensor name '{name}' too long for ggml (max 63 bytes)")
        ne = [int(d) for d in reversed(list(torch_shape))]
        n = 1
        for d in ne:
            n *= d
        if len(values) != n:
            raise ValueError(f"tensor '{name}': {len(values)} values for shape {list(torch_shape)}")
        if ggml_type == GGML_F32:
            data = _f32_bytes(values)
        elif ggml_type == GGML_F16:
            data = _f16_bytes(values)
        elif ggml_type == GGML_Q8_0:
            if ne[0] % QK8_0:
                raise ValueError(f"tensor '{name}': ne0={ne[0]} is not a multiple of {QK8_0} (Q8_0)")
            data = quantize_q8_0(values)
        else:
            raise ValueError(f"unsupported ggml type {ggml_type}")
        self._names.add(name)
        self._tensors.append((name, ne, ggml_type, data))

    def add_raw_tensor(self, name: str, ne, ggml_type: int, data: bytes) -> None:
        """Adds already-encoded tensor data (ne in ggml order)."""
        if name in self._names:
            raise ValueError(f"duplicate tensor '{name}'")
        self._names.add(name)
        self._tensors.append((name, [int(d) for d in ne], ggml_type, bytes(data)))

    # ---- serialisation
    @staticmethod
    def _str(s: str) -> bytes:
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def _value(self, vtype: int, value, elem_type: int | None) -> bytes:
        if vtype == T_STRING:
            return self._str(value)
        if vtype == T_ARRAY:
            head = struct.pack("<IQ", elem_type, len(value))
            if elem_type == T_STRING:
                return head + b"".join(self._str(v) for v in value)
            fmt = _SCALAR_FMT[elem_type]
            return head + struct.pack("<" + fmt[1] * len(value), *value)
        return struct.pack(_SCALAR_FMT[vtype], value)

    def write(self, path: str) -> int:
        out = bytearray()
        out += GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(self._tensors), len(self._kv))
        for key, vtype, value, elem_type in self._kv:
            out += self._str(key) + struct.pack("<I", vtype) + self._value(vtype, value, elem_type)
        offset = 0
        offsets = []
        for name, ne, ttype, data in self._tensors:
            offsets.append(offset)
            out += self._str(name) + struct.pack("<I", len(ne)) + struct.pack("<" + "Q" * len(ne), *ne)
            out += struct.pack("<IQ", ttype, offset)
            offset += len(data)
            offset += (-offset) % ALIGNMENT
        out += b"\0" * ((-len(out)) % ALIGNMENT)
        with open(path, "wb") as f:
            f.write(out)
            pos = 0
            for (name, ne, ttype, data), off in zip(self._tensors, offsets):
                assert pos == off
                f.write(data)
                pos += len(data)
                pad = (-pos) % ALIGNMENT
                f.write(b"\0" * pad)
                pos += pad
        return len(out) + pos


# ---------------------------------------------------------------- reader (tests, re-export)
class GGUFFile:
    """Minimal reader: metadata dict and tensor table (name -> (ne, type, bytes))."""

    def __init__(self, path: str) -> None:
        with open(path, "rb") as f:
            buf = f.read()
        self.buf = buf
        if buf[:4] != GGUF_MAGIC:
            raise ValueError(f"{path}: not a GGUF file")
        version, n_tensors, n_kv = struct.unpack_from("<IQQ", buf, 4)
        if version != 3:
            raise ValueError(f"{path}: GGUF version {version}, expected 3")
        pos = 24
        self.kv: dict[str, object] = {}
        self.kv_types: dict[str, tuple[int, int | None]] = {}

        def rd_str(p):
            (n,) = struct.unpack_from("<Q", buf, p)
            return buf[p + 8:p + 8 + n].decode("utf-8"), p + 8 + n

        def rd_val(p, t):
            if t == T_STRING:
                return rd_str(p)
            fmt = _SCALAR_FMT[t]
            return struct.unpack_from(fmt, buf, p)[0], p + struct.calcsize(fmt)

        for _ in range(n_kv):
            key, pos = rd_str(pos)
            (vt,) = struct.unpack_from("<I", buf, pos)
            pos += 4
            if vt == T_ARRAY:
                et, cnt = struct.unpack_from("<IQ", buf, pos)
                pos += 12
                vals = []
                for _ in range(cnt):
                    v, pos = rd_val(pos, et)
                    vals.append(v)
                self.kv[key] = vals
                self.kv_types[key] = (vt, et)
            else:
                v, pos = rd_val(pos, vt)
                self.kv[key] = v
                self.kv_types[key] = (vt, None)
        infos = []
        for _ in range(n_tensors):
            name, pos = rd_str(pos)
            (nd,) = struct.unpack_from("<I", buf, pos)
            pos += 4
            ne = list(struct.unpack_from("<" + "Q" * nd, buf, pos))
            pos += 8 * nd
            tt, off = struct.unpack_from("<IQ", buf, pos)
            pos += 12
            infos.append((name, ne, tt, off))
        align = int(self.kv.get("general.alignment", ALIGNMENT))
        data_start = pos + ((-pos) % align)
        self.tensors: dict[str, tuple[list[int], int, bytes]] = {}
        for name, ne, tt, off in infos:
            n = 1
            for d in ne:
                n *= d
            size = {GGML_F32: 4 * n, GGML_F16: 2 * n, GGML_Q8_0: 34 * (n // QK8_0)}[tt]
            start = data_start + off
            self.tensors[name] = (ne, tt, buf[start:start + size])
        self.order = [i[0] for i in infos]

    def tensor_values(self, name: str) -> list:
        ne, tt, data = self.tensors[name]
        if tt == GGML_F32:
            return list(array.array("f", data))
        if tt == GGML_F16:
            return [struct.unpack_from("<e", data, 2 * i)[0] for i in range(len(data) // 2)]
        return dequantize_q8_0(data)
