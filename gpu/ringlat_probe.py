"""GPU probe for issue 15 (run by gpu/ringlat.sh): the transport of one 16-byte
message and its 16-byte answer through mapped host memory, by one GPU thread,
in four ways, to choose the ring's protocol by measurement:

- head / seq: the host writes the payload, then a head word; the GPU polls the
  head (ld.acquire.sys), then reads the payload; it writes the answer, then its
  sequence word with a release store (st.release.sys): the ring on main.
- LL request: the host writes the payload as LL words (each 4 data bytes with
  a 32-bit flag in one 8-byte store, NCCL's low-latency protocol); the GPU's
  one poll (two 16-byte loads) reads the data with the flags: no second read.
- LL answer: the GPU writes the answer as LL words (two 16-byte volatile
  stores, flags = the sequence number), no release fence; the host watches the
  flags and takes the data (words.c's ll_wait).

Each way x the GPU's backoff between polls (0 or 32 ns). Host side: the C
words module (workbench/backends/native/words.c); the time is host clock from
just before the publish to just after the answer is seen, two C calls. Prints
p50/p90/p99 in µs.
"""
from __future__ import annotations

import sys

import numpy as np

import workbench as wb
from workbench.backends import native_words

SOURCE = r"""
static __device__ __forceinline__ long long ld_acquire_sys(const long long* p) {
    long long v; asm volatile("ld.acquire.sys.global.s64 %0, [%1];" : "=l"(v) : "l"(p) : "memory"); return v;
}
static __device__ __forceinline__ uint4 ld_volatile_v4(const void* p) {
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ void st_volatile_v4(void* p, unsigned a, unsigned b, unsigned c, unsigned d) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}
static __device__ __forceinline__ void st_release_sys(long long* p, long long v) {
    asm volatile("st.release.sys.global.s64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}

extern "C" __global__ void probe(unsigned long long base, int ll_request, int ll_answer, int backoff)
{
    if (threadIdx.x != 0) return;
    char* b = (char*)base;
    const long long* head = (const long long*)(b + 0);
    const long long* stop = (const long long*)(b + 64);
    long long* aseq = (long long*)(b + 128);
    const uint4* req = (const uint4*)(b + 256);
    const char* llreq = b + 384;
    uint4* resp = (uint4*)(b + 512);
    char* llresp = b + 640;
    for (long long seq = 1;; ++seq) {
        uint4 in;
        for (unsigned polls = 0;; ++polls) {
            if (ll_request) {
                const uint4 x = ld_volatile_v4(llreq), y = ld_volatile_v4(llreq + 16);
                const unsigned f = (unsigned)seq;
                if (x.y == f && x.w == f && y.y == f && y.w == f) {
                    in = make_uint4(x.x, x.z, y.x, y.z);
                    break;
                }
            } else if (ld_acquire_sys(head) >= seq) {
                in = ld_volatile_v4(req);  // (after the acquire: ordered)
                break;
            }
            if ((polls & 7) == 7 && *(volatile const long long*)stop) return;
            if (backoff) __nanosleep(backoff);
        }
        const float sum = __uint_as_float(in.x) + __uint_as_float(in.y);
        if (ll_answer) {
            const unsigned f = (unsigned)seq;
            st_volatile_v4(llresp, __float_as_uint(sum), f, in.z, f);
            st_volatile_v4(llresp + 16, 0u, f, 0u, f);
        } else {
            *resp = make_uint4(__float_as_uint(sum), in.z, 0u, 0u);
            st_release_sys(aseq, seq);
        }
    }
}
"""


def run(module, backend, words, ll_request: bool, ll_answer: bool, backoff: int, count: int):
    buf = backend.alloc_mapped(4096)
    host = buf.host
    host[:] = 0
    addr = int(host.ctypes.data)
    kernel = module["probe"]
    launch = backend.launch_persistent(kernel.function, (1, 1, 1), (32, 1, 1),
                                       kernel.convert_args((buf.device_ptr, int(ll_request),
                                                            int(ll_answer), backoff)))
    payload = np.zeros(4, dtype=np.uint32)
    out = np.zeros(4, dtype=np.uint32)
    scratch = np.zeros(2, dtype=np.int64)  # a word nobody writes: publish_wait only stores
    times = np.empty(count, dtype=np.int64)
    wrong = 0
    try:
        for seq in range(1, count + 1):
            a, bb = np.float32(seq % 100), np.float32(0.5)
            payload[0], payload[1], payload[2] = a.view(np.uint32), bb.view(np.uint32), seq
            t0 = words.now_ns()
            if ll_request:
                words.ll_write(addr + 384, payload.ctypes.data, 16, seq)
            else:
                host[256:272] = payload.view(np.uint8)
                words.publish_wait(addr, seq, scratch.ctypes.data, -1, 0, 0, 0, 0)
            if ll_answer:
                ok = words.ll_wait(addr + 640, 16, seq, out.ctypes.data, 2_000_000_000)
            else:
                ok = words.wait_word(addr + 128, seq, 2_000_000_000)
                out[:] = host[512:528].view(np.uint32)
            times[seq - 1] = words.now_ns() - t0
            if not ok:
                raise RuntimeError(f"no answer to message {seq} within 2 s")
            if out[1] != seq or out.view(np.float32)[0] != np.float32(a + bb):
                wrong += 1
    finally:
        host[64:72] = np.array([1], dtype=np.int64).view(np.uint8)
        launch.wait(5)
    us = times[count // 10:] * 1e-3  # the first tenth warms up
    return np.percentile(us, [50, 90, 99]), wrong


def main() -> int:
    b = wb.backend()
    words = native_words.module()
    if b.simulated or words is None:
        print(f"needs a GPU and the C words module ({native_words.unavailable_reason()})")
        return 1
    module = wb.compile(SOURCE, name="ringlat_probe")
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    print(f"one 16-byte message round trip through mapped host memory, one GPU thread, "
          f"{count} messages each ({b.device_properties().name})")
    print(f"{'request':<12} {'answer':<12} {'backoff':>8} {'p50 µs':>8} {'p90 µs':>8} {'p99 µs':>8}  wrong")
    for ll_request in (False, True):
        for ll_answer in (False, True):
            for backoff in (32, 0):
                (p50, p90, p99), wrong = run(module, b, words, ll_request, ll_answer, backoff, count)
                print(f"{'LL' if ll_request else 'head+read':<12} "
                      f"{'LL' if ll_answer else 'release seq':<12} {backoff:>6}ns "
                      f"{p50:8.2f} {p90:8.2f} {p99:8.2f}  {wrong}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
