#!/usr/bin/env python3
"""Zeroes the PTX payloads of an executable's CUDA fat binaries (section .nv_fatbin), in place:
the sm_90 SASS entries stay, the layout and every offset stay, and xz then packs the zeros to
nothing (the carry to the device machine has a size limit). Run the binary there with
CUDA_DISABLE_PTX_JIT=1 so that the driver never looks at the PTX. Usage: zero_ptx.py EXE."""
import os, struct, subprocess, sys, tempfile

exe = sys.argv[1]
with tempfile.TemporaryDirectory() as d:
    fb = os.path.join(d, "fb.bin")
    subprocess.run(["objcopy", "--dump-section", ".nv_fatbin=" + fb, exe, os.path.join(d, "junk")], check=True)
    b = bytearray(open(fb, "rb").read())
    off, zeroed, ptx, elf = 0, 0, 0, 0
    while off + 16 <= len(b):
        magic, ver, hsz, fsz = struct.unpack_from("<IHHQ", b, off)
        if magic != 0xBA55ED50:
            off += 8
            continue
        e, end = off + hsz, off + hsz + fsz
        while e < end:
            kind, _, ehs, psz = struct.unpack_from("<HHIQ", b, e)
            if kind == 1:  # PTX
                b[e + ehs:e + ehs + psz] = bytes(psz)
                zeroed += psz
                ptx += 1
            elif kind == 2:
                elf += 1
            e += ehs + psz
        off = end
    if elf == 0 or elf < ptx:
        sys.exit("zero_ptx: %s: %d ELF entries for %d PTX: not touching it" % (exe, elf, ptx))
    open(fb, "wb").write(b)
    subprocess.run(["objcopy", "--update-section", ".nv_fatbin=" + fb, exe], check=True)
    print("%s: %d PTX entries zeroed (%d bytes), %d SASS entries kept" % (exe, ptx, zeroed, elf))
