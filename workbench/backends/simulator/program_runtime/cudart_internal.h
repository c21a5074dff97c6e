// What the parts of the simulator's CUDA runtime for whole programs share. Each
// cudart*.cpp file is one part, linked with the worker runtime's parts (../native/,
// every one but worker.cpp):
//
//   cudart.cpp         start and exit, faults, the last and the sticky error, device
//                      output (printf, failed asserts), the profiler
//   cudart_errors.cpp  every error's name and words
//   cudart_device.cpp  the device's properties and attributes, device-wide calls
//   cudart_memory.cpp  device, managed and host memory, stream-ordered allocation, IPC
//   cudart_copies.cpp  copies (1D, 2D, 3D, peer, symbols) and memsets
//   cudart_arrays.cpp  CUDA arrays, texture and surface objects
//   cudart_streams.cpp streams, events, callbacks, stream capture and graphs
//   cudart_launch.cpp  launches (<<<>>>, cudaLaunchKernel, cooperative), function
//                      attributes, occupancy
//
// Everything runs when it is called: launches, copies and "async" calls are synchronous
// (streams are in order; events take the host's clock when recorded). Device output is
// held until the next synchronising call, as a GPU's is.
#ifndef WBSIM_CUDART_INTERNAL_H
#define WBSIM_CUDART_INTERNAL_H
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "runtime.h"
#include "wbsim_program.h"
#include "cuda_profiler_api.h"

// -- cudart.cpp -------------------------------------------------------------------------
// Runtime calls from several host threads take turns (launches run one at a time).
typedef std::unique_lock<std::recursive_mutex> ApiLock;
// The first CUDA call starts the runtime; every call takes the lock.
[[nodiscard]] ApiLock start();
// Sets the last error; with a message, says on stderr what a GPU would leave unsaid.
cudaError_t fail(cudaError_t e, const char* fmt = nullptr, ...) __attribute__((format(printf, 2, 3)));
// The error that every later call returns (a failed device assert), or cudaSuccess.
extern cudaError_t g_sticky;
extern cudaDeviceProp g_prop;
// The virtual device's properties: $WBSIM_DEVICE ("key=value;..."), else an H100's.
void load_properties();
// Device printf and failed asserts of the last launch, written at the next
// synchronising call (or the next launch, or exit).
void flush_device_output();
// Checks a device number: false (with cudaErrorInvalidDevice) when it is not 0.
bool valid_device(int device, const char* api);
std::string format_text(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Every runtime call that a GPU answers with the sticky error starts with this.
#define API_ENTER()                       \
    ApiLock held = start();               \
    if (g_sticky != cudaSuccess) return fail(g_sticky)

// -- cudart_memory.cpp ------------------------------------------------------------------
enum Side { HOST, DEVICE, MANAGED };
// Device memory is accessible to host code only while the runtime works on it.
struct DeviceOpen {
    DeviceOpen();
    ~DeviceOpen();
};
void reserve_memory();
void free_all_memory();
size_t device_memory_used();
// Where [p, p+n) lies; false (with a message) when it starts in device or managed
// memory but does not fit one live allocation.
bool locate(const void* p, size_t n, Side* side, const char* api, const char* role);
// Pinned or registered host memory (a kernel reaches it at its own address).
bool is_pinned(const void* p);
// An allocation of device memory for the runtime's own use (arrays), or nullptr.
void* device_alloc(size_t bytes, const char* api);
bool device_free(void* p);
void describe_address(char* out, size_t n, uint64_t a, bool in_kernel);
// A copy as cudaMemcpy checks and makes it (api: the name in messages).
cudaError_t checked_copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind, const char* api);

// -- cudart_streams.cpp -----------------------------------------------------------------
bool known_stream(cudaStream_t s);
bool is_capturing(cudaStream_t s);
// When stream s is being captured into a graph, adds op to it and returns true.
bool capture(cudaStream_t s, std::function<cudaError_t()> op, const char* what);
void reset_streams();

// -- cudart_launch.cpp ------------------------------------------------------------------
// The kernel named by argument `index` (0-based) of an API call's argument text.
std::string kernel_argument(const char* text, int index);
void reset_launch_state();
// The launch in progress failed an assert (set from the asserting thread).
void note_failed_assert(const char* message);
bool take_failed_assert();

// -- cudart_arrays.cpp ------------------------------------------------------------------
void free_all_arrays();
#endif
