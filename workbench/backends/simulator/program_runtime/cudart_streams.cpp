// Streams, events, host callbacks, stream capture and graphs of whole programs on the
// simulator. Work runs when it is issued, so every stream is always idle: synchronising
// waits for nothing (it writes the device output held), queries answer cudaSuccess, an
// event takes the host's clock when recorded, and a callback runs at once.
//
// Capture: between cudaStreamBeginCapture and cudaStreamEndCapture, work issued to the
// capturing stream (and to streams that joined it by waiting on an event recorded in it)
// is kept, not run: kernels with a copy of their arguments, copies, memsets, host
// functions, event records. A graph replays it in the order it was issued (a valid order
// of its dependencies).
#include <memory>
#include <set>
#include <vector>

#include "cudart_internal.h"

struct Graph { std::vector<std::function<cudaError_t()>> ops; };
struct CUstream_st {
    unsigned flags;
    int priority;
    std::shared_ptr<Graph> capturing;  // the graph being captured into, or null
    cudaStream_t origin;               // the stream that began the capture
};
struct CUevent_st {
    uint64_t ns;
    bool recorded;
    unsigned flags;
    std::shared_ptr<Graph> captured_in;  // recorded in a capture: waiting on it joins that capture
};
struct CUgraph_st { std::shared_ptr<Graph> graph; };
struct CUgraphExec_st { std::shared_ptr<Graph> graph; };

static std::set<cudaStream_t> g_streams;
static std::set<cudaEvent_t> g_events;
static std::set<cudaGraph_t> g_graphs;
static std::set<cudaGraphExec_t> g_execs;
static CUstream_st g_legacy{0, 0, nullptr, nullptr};  // the default stream's capture state

static CUstream_st* stream_state(cudaStream_t s) {
    return (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) ? &g_legacy : s;
}
bool known_stream(cudaStream_t s) {
    return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread || g_streams.count(s);
}
bool is_capturing(cudaStream_t s) { return known_stream(s) && stream_state(s)->capturing != nullptr; }
bool capture(cudaStream_t s, std::function<cudaError_t()> op, const char*) {
    if (!known_stream(s)) return false;
    CUstream_st* st = stream_state(s);
    if (!st->capturing) return false;
    st->capturing->ops.push_back(std::move(op));
    return true;
}
void reset_streams() {
    for (cudaStream_t s : g_streams) delete s;
    for (cudaEvent_t e : g_events) delete e;
    for (cudaGraph_t g : g_graphs) delete g;
    for (cudaGraphExec_t g : g_execs) delete g;
    g_streams.clear();
    g_events.clear();
    g_graphs.clear();
    g_execs.clear();
    g_legacy.capturing.reset();
}

// -- streams ---------------------------------------------------------------------------
extern "C" cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int flags, int priority) {
    API_ENTER();
    if (!s) return fail(cudaErrorInvalidValue, "cudaStreamCreate: the stream pointer is NULL");
    if (flags & ~(unsigned)cudaStreamNonBlocking)
        return fail(cudaErrorInvalidValue, "cudaStreamCreateWithFlags: unknown flags 0x%x", flags);
    *s = new CUstream_st{flags, priority < -5 ? -5 : priority > 0 ? 0 : priority, nullptr, nullptr};
    g_streams.insert(*s);
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
    return cudaStreamCreateWithPriority(s, flags, 0);
}
extern "C" cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithPriority(s, 0, 0); }
extern "C" cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned int* flags) {
    API_ENTER();
    if (!known_stream(s)) return fail(cudaErrorInvalidResourceHandle);
    *flags = stream_state(s)->flags;
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamGetPriority(cudaStream_t s, int* priority) {
    API_ENTER();
    if (!known_stream(s)) return fail(cudaErrorInvalidResourceHandle);
    *priority = stream_state(s)->priority;
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamDestroy(cudaStream_t s) {
    API_ENTER();
    if (!g_streams.erase(s)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: unknown stream %p", (void*)s);
    delete s;
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    API_ENTER();
    if (!known_stream(s))
        return fail(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize: unknown stream %p", (void*)s);
    flush_device_output();
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamQuery(cudaStream_t s) {
    API_ENTER();
    return known_stream(s) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}
extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
    API_ENTER();
    if (!known_stream(s) || !g_events.count(e))
        return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: unknown stream or event");
    CUstream_st* st = stream_state(s);
    if (e->captured_in && !st->capturing) st->capturing = e->captured_in;  // the stream joins the capture
    return cudaSuccess;
}
// Callbacks run at once, without the API lock (they may signal threads that call CUDA).
extern "C" cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t fn, void* data, unsigned int flags) {
    {
        API_ENTER();
        if (!known_stream(s)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamAddCallback: unknown stream");
        if (!fn || flags != 0) return fail(cudaErrorInvalidValue, "cudaStreamAddCallback: a NULL callback, or "
                                           "flags other than 0");
        if (stream_state(s)->capturing)
            return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamAddCallback in a capturing stream; "
                        "use cudaLaunchHostFunc");
        flush_device_output();
    }
    fn(s, cudaSuccess, data);
    return cudaSuccess;
}
extern "C" cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* data) {
    {
        API_ENTER();
        if (!known_stream(s)) return fail(cudaErrorInvalidResourceHandle, "cudaLaunchHostFunc: unknown stream");
        if (!fn) return fail(cudaErrorInvalidValue, "cudaLaunchHostFunc: the function is NULL");
        if (capture(s, [=] { fn(data); return cudaSuccess; }, "cudaLaunchHostFunc")) return cudaSuccess;
        flush_device_output();
    }
    fn(data);
    return cudaSuccess;
}
// Access policy windows and the other launch attributes: kept, with no effect.
static std::map<cudaStream_t, std::map<int, cudaStreamAttrValue>> g_stream_attributes;
extern "C" cudaError_t cudaStreamSetAttribute(cudaStream_t s, cudaStreamAttrID attr, const cudaStreamAttrValue* v) {
    API_ENTER();
    if (!known_stream(s) || !v) return fail(cudaErrorInvalidValue);
    if (attr == cudaLaunchAttributeAccessPolicyWindow &&
        v->accessPolicyWindow.num_bytes > (size_t)g_prop.accessPolicyMaxWindowSize)
        return fail(cudaErrorInvalidValue, "cudaStreamSetAttribute: an access policy window of %zu bytes; "
                    "the device allows %d", v->accessPolicyWindow.num_bytes, g_prop.accessPolicyMaxWindowSize);
    g_stream_attributes[s][(int)attr] = *v;
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamGetAttribute(cudaStream_t s, cudaStreamAttrID attr, cudaStreamAttrValue* v) {
    API_ENTER();
    if (!known_stream(s) || !v) return fail(cudaErrorInvalidValue);
    auto& kept = g_stream_attributes[s];
    auto it = kept.find((int)attr);
    if (it != kept.end()) *v = it->second;
    else memset(v, 0, sizeof *v);
    return cudaSuccess;
}

// -- capture and graphs ------------------------------------------------------------------
extern "C" cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
    API_ENTER();
    if (!known_stream(s)) return fail(cudaErrorInvalidResourceHandle);
    if (s == nullptr || s == cudaStreamLegacy)
        return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture: the legacy default stream "
                    "cannot be captured; capture a stream made with cudaStreamCreate");
    CUstream_st* st = stream_state(s);
    if (st->capturing) return fail(cudaErrorIllegalState, "cudaStreamBeginCapture: the stream is capturing already");
    st->capturing = std::make_shared<Graph>();
    st->origin = s;
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
    API_ENTER();
    if (!known_stream(s) || !graph) return fail(cudaErrorInvalidValue);
    CUstream_st* st = stream_state(s);
    if (!st->capturing) return fail(cudaErrorIllegalState, "cudaStreamEndCapture: the stream is not capturing");
    if (st->origin != s) return fail(cudaErrorStreamCaptureUnmatched);
    std::shared_ptr<Graph> g = st->capturing;
    for (cudaStream_t other : g_streams)  // the streams that joined it leave it
        if (other->capturing == g) { other->capturing.reset(); other->origin = nullptr; }
    st->capturing.reset();
    st->origin = nullptr;
    for (cudaEvent_t e : g_events)
        if (e->captured_in == g) e->captured_in.reset();
    *graph = new CUgraph_st{g};
    g_graphs.insert(*graph);
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
    API_ENTER();
    if (!known_stream(s) || !status) return fail(cudaErrorInvalidValue);
    *status = stream_state(s)->capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGraphCreate(cudaGraph_t* graph, unsigned int) {
    API_ENTER();
    *graph = new CUgraph_st{std::make_shared<Graph>()};
    g_graphs.insert(*graph);
    return cudaSuccess;
}
extern "C" cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
    API_ENTER();
    if (!exec || !g_graphs.count(graph)) return fail(cudaErrorInvalidValue, "cudaGraphInstantiate: unknown graph");
    *exec = new CUgraphExec_st{graph->graph};
    g_execs.insert(*exec);
    return cudaSuccess;
}
extern "C" cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long f) {
    return cudaGraphInstantiate(exec, graph, f);
}
extern "C" cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
    API_ENTER();
    if (!g_execs.count(exec)) return fail(cudaErrorInvalidValue, "cudaGraphLaunch: unknown executable graph");
    if (!known_stream(s)) return fail(cudaErrorInvalidResourceHandle);
    std::shared_ptr<Graph> g = exec->graph;
    if (capture(s, [g] {
            for (auto& op : g->ops) { cudaError_t e = op(); if (e != cudaSuccess) return e; }
            return cudaSuccess;
        }, "cudaGraphLaunch"))
        return cudaSuccess;
    for (auto& op : g->ops) {
        cudaError_t e = op();
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
extern "C" cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t s) {
    API_ENTER();
    if (!g_execs.count(exec)) return fail(cudaErrorInvalidValue);
    return known_stream(s) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}
extern "C" cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    API_ENTER();
    if (!g_execs.erase(exec)) return fail(cudaErrorInvalidValue, "cudaGraphExecDestroy: unknown executable graph");
    delete exec;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    API_ENTER();
    if (!g_graphs.erase(graph)) return fail(cudaErrorInvalidValue, "cudaGraphDestroy: unknown graph");
    delete graph;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
    API_ENTER();
    if (!g_graphs.count(graph) || !count) return fail(cudaErrorInvalidValue);
    size_t n = graph->graph->ops.size();
    if (nodes)
        for (size_t i = 0; i < *count && i < n; ++i) nodes[i] = (cudaGraphNode_t)(uintptr_t)(i + 1);
    *count = n;
    return cudaSuccess;
}

// -- events ------------------------------------------------------------------------------
extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
    API_ENTER();
    if (!e) return fail(cudaErrorInvalidValue, "cudaEventCreate: the event pointer is NULL");
    if (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess))
        return fail(cudaErrorInvalidValue, "cudaEventCreateWithFlags: unknown flags 0x%x", flags);
    if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming))
        return fail(cudaErrorInvalidValue, "cudaEventCreateWithFlags: cudaEventInterprocess needs "
                    "cudaEventDisableTiming");
    *e = new CUevent_st{0, false, flags, nullptr};
    g_events.insert(*e);
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }
extern "C" cudaError_t cudaEventDestroy(cudaEvent_t e) {
    API_ENTER();
    if (!g_events.erase(e)) return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy: unknown event %p", (void*)e);
    delete e;
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    API_ENTER();
    if (!g_events.count(e) || !known_stream(s))
        return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: unknown event or stream");
    CUstream_st* st = stream_state(s);
    if (st->capturing) {
        e->captured_in = st->capturing;
        st->capturing->ops.push_back([e] {
            if (g_events.count(e)) { e->ns = now_ns(); e->recorded = true; }
            return cudaSuccess;
        });
        return cudaSuccess;
    }
    e->captured_in.reset();
    e->ns = now_ns();
    e->recorded = true;
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int) {
    return cudaEventRecord(e, s);
}
extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    API_ENTER();
    if (!g_events.count(e))
        return fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: unknown event %p", (void*)e);
    flush_device_output();
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventQuery(cudaEvent_t e) {
    API_ENTER();
    return g_events.count(e) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}
extern "C" cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start_event, cudaEvent_t end_event) {
    API_ENTER();
    if (!ms) return fail(cudaErrorInvalidValue, "cudaEventElapsedTime: ms is NULL");
    if (!g_events.count(start_event) || !g_events.count(end_event))
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: unknown event");
    if ((start_event->flags | end_event->flags) & cudaEventDisableTiming)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event made with cudaEventDisableTiming");
    if (!start_event->recorded || !end_event->recorded)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event that was never recorded");
    *ms = (float)((double)((int64_t)(end_event->ns - start_event->ns)) / 1e6);
    return cudaSuccess;
}

// Work is done when it is issued, so an event another process records is always complete:
// its handle only needs to open as an event.
extern "C" cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle, cudaEvent_t e) {
    API_ENTER();
    if (!handle || !g_events.count(e)) return fail(cudaErrorInvalidResourceHandle);
    if (!(e->flags & cudaEventInterprocess))
        return fail(cudaErrorInvalidResourceHandle, "cudaIpcGetEventHandle: the event was not made with "
                    "cudaEventInterprocess");
    memset(handle, 0, sizeof *handle);
    memcpy(handle->reserved, "wbsim-event", 11);
    return cudaSuccess;
}
extern "C" cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* e, cudaIpcEventHandle_t handle) {
    if (memcmp(handle.reserved, "wbsim-event", 11) != 0) {
        API_ENTER();
        return fail(cudaErrorInvalidValue, "cudaIpcOpenEventHandle: not a handle from cudaIpcGetEventHandle");
    }
    return cudaEventCreateWithFlags(e, cudaEventDisableTiming | cudaEventInterprocess);
}
