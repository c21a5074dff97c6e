// Device printf into the control page's buffer, and the clocks.
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include "runtime.h"

extern "C" int wbsim_printf(const char* fmt, ...) {
    char local[1024];
    va_list ap;
    if (!t_in_kernel) {  // host code of a whole program: its own stdout, at once
        va_start(ap, fmt);
        int n = vprintf(fmt, ap);
        va_end(ap);
        return n;
    }
    va_start(ap, fmt);
    int n = vsnprintf(local, sizeof local, fmt, ap);
    va_end(ap);
    if (n < 0) return n;
    std::string big;
    const char* text = local;
    if ((size_t)n >= sizeof local) {
        big.resize((size_t)n + 1);
        va_start(ap, fmt);
        vsnprintf(&big[0], big.size(), fmt, ap);
        va_end(ap);
        text = big.c_str();
    }
    uint64_t at = __atomic_fetch_add(&g_ctl->printf_len, (uint64_t)n, __ATOMIC_RELAXED);
    if (at + (uint64_t)n > g_ctl->printf_capacity) {
        __atomic_fetch_add(&g_ctl->printf_dropped, (uint64_t)n, __ATOMIC_RELAXED);
        return n;
    }
    memcpy((char*)g_ctl + WBSIM_PRINTF_OFFSET + at, text, (size_t)n);
    // Messages that fit form a prefix of the buffer (claims only grow).
    __atomic_fetch_add(&g_ctl->printf_committed, (uint64_t)n, __ATOMIC_RELEASE);
    return n;
}


extern "C" unsigned long long wbsim_clock64(void) {
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    return (unsigned long long)std::chrono::steady_clock::now().time_since_epoch().count();
#endif
}

extern "C" long wbsim_clock(void) {
    return t_in_kernel ? (long)wbsim_clock64() : (long)clock();
}

extern "C" unsigned long long wbsim_globaltimer(void) {
    return (unsigned long long)std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::system_clock::now().time_since_epoch()).count();
}

uint64_t now_ns() {
    return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
}
