"""A second, independent meter: PyTorch's CPU allocator wrapped so that it counts every byte it hands out.

:mod:`.measure` reads the profiler's allocation events. This module does not: it compiles a few
lines of C++ (once per PyTorch version, into the user's cache directory) that put a counting
allocator in front of PyTorch's own CPU allocator (``c10::SetCPUAllocator``), and reads its counters
(bytes held now, the most held since a reset) through ``ctypes``. Every CPU tensor storage, every
kernel's workspace and temporaries, from every thread, goes through it. It measures what the
profiler meter measures by another road, so the two agreeing (``tests/test_meter.py``, on every zoo
model) is the check that the meter counts what it says.

It needs a C++ compiler (``c++``, ``g++`` or ``$CXX``); :func:`available` says whether it can be
built here. Tensors allocated before it is installed are not counted when they are freed, so it is
installed early (before the model is built) and left installed for the rest of the process.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch

SOURCE = r"""
#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

namespace {
std::atomic<int64_t> current{0};
std::atomic<int64_t> peak{0};
c10::Allocator* base = nullptr;
c10::DeleterFnPtr base_delete = nullptr;
std::mutex sizes_lock;
std::unordered_map<void*, int64_t> sizes;

void counted_delete(void* ptr) {
  if (ptr == nullptr) return;
  int64_t bytes = 0;
  {
    std::lock_guard<std::mutex> guard(sizes_lock);
    auto found = sizes.find(ptr);
    if (found != sizes.end()) { bytes = found->second; sizes.erase(found); }
  }
  current.fetch_sub(bytes);
  base_delete(ptr);
}

struct Counting final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr inner = base->allocate(n);
    c10::Device device = inner.device();
    void* ptr = inner.release_context();
    if (ptr != nullptr) {
      {
        std::lock_guard<std::mutex> guard(sizes_lock);
        sizes[ptr] = static_cast<int64_t>(n);
      }
      int64_t now = current.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
      int64_t seen = peak.load();
      while (now > seen && !peak.compare_exchange_weak(seen, now)) {}
    }
    return {ptr, ptr, &counted_delete, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counted_delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { base->copy_data(dest, src, count); }
};
Counting counting;
}

extern "C" {
int remat_counting_install() {
  if (base == nullptr) {
    c10::Allocator* found = c10::GetCPUAllocator();
    if (found->raw_deleter() == nullptr) return 1;
    base = found;
    base_delete = found->raw_deleter();
  }
  c10::SetCPUAllocator(&counting, 255);
  return 0;
}
void remat_counting_reset_peak() { peak.store(current.load()); }
int64_t remat_counting_current() { return current.load(); }
int64_t remat_counting_peak() { return peak.load(); }
}
"""

_library: ctypes.CDLL | None = None


class CountingUnavailable(RuntimeError):
    """The counting allocator cannot be built or installed here (no C++ compiler, another CPU allocator)."""


def _compiler() -> str | None:
    for candidate in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def available() -> bool:
    """Whether the counting allocator can be built here (a C++ compiler is on the PATH)."""
    return _compiler() is not None


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "remat-explorer"


def _build() -> Path:
    compiler = _compiler()
    if compiler is None:
        raise CountingUnavailable("the counting allocator needs a C++ compiler (c++, g++ or $CXX) on the PATH")
    root = Path(torch.__file__).parent
    tag = hashlib.sha256((SOURCE + torch.__version__).encode()).hexdigest()[:16]
    target = _cache_dir() / f"counting-allocator-{tag}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    source = target.with_suffix(".cpp")
    source.write_text(SOURCE)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    command = [compiler, "-O2", "-std=c++17", "-shared", "-fPIC", f"-I{root / 'include'}", str(source),
               f"-L{root / 'lib'}", "-lc10", f"-Wl,-rpath,{root / 'lib'}", "-o", str(partial)]
    built = subprocess.run(command, capture_output=True, text=True)
    if built.returncode != 0:
        raise CountingUnavailable(f"compiling the counting allocator failed: {built.stderr.strip()[-500:]}")
    partial.replace(target)  # atomic: a concurrent build finds a whole library or none
    return target


def install() -> None:
    """Build (once) and install the counting allocator in this process; later CPU allocations are counted.

    Raises
    ------
    CountingUnavailable
        Without a C++ compiler, or when the CPU allocator in place cannot be wrapped.
    """
    global _library
    if _library is not None:
        return
    library = ctypes.CDLL(str(_build()))
    library.remat_counting_current.restype = ctypes.c_int64
    library.remat_counting_peak.restype = ctypes.c_int64
    if library.remat_counting_install() != 0:
        raise CountingUnavailable("PyTorch's CPU allocator hands out pointers it does not own itself, so it cannot "
                                  "be wrapped")
    _library = library


@dataclass
class Count:
    """What :func:`counting` saw: the most bytes held at once above the start, and the bytes still held at the end."""

    peak: int = 0
    end: int = 0


@contextlib.contextmanager
def counting() -> Iterator[Count]:
    """Count the CPU bytes the block allocates (see the module notes): ``count.peak`` and ``count.end`` are set when
    it ends."""
    install()
    count = Count()
    start = _library.remat_counting_current()
    _library.remat_counting_reset_peak()
    try:
        yield count
    finally:
        count.peak = _library.remat_counting_peak() - start
        count.end = _library.remat_counting_current() - start
