/* A stand-in libcupti for tests/test_cupti_native.py, where no GPU runs CUPTI:
 * the eight activity-API functions the C collector (native/cupti_records.c)
 * looks up, delivering kernel records the test queues, through the buffer
 * callbacks the collector registered, as CUPTI's own thread would. It also
 * reports what the collector did with its buffers (handed out zeroed, as it
 * told CUPTI they would be). Built by the test with the system's cc against
 * the same CUPTI headers as the collector. */
#include <cupti_activity.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint32_t correlation; const char *name; uint64_t start, end; } Queued;

static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static Queued queued[16384];
static int queued_count = 0, enabled = 0, dirty_buffers = 0, buffers_seen = 0, last_flag = -1;
static uint8_t zeroed_attribute = 0;
static char shared_name[64];  /* one address, different texts (fake_name) */

CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attribute, size_t *size, void *value) {
    if (attribute == CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER && *size == 1)
        zeroed_attribute = *(uint8_t *)value;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                           CUpti_BuffersCallbackCompleteFunc complete) {
    requested = request;
    completed = complete;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
    (void)kind;
    if (getenv("FAKE_CUPTI_REFUSE")) return CUPTI_ERROR_NOT_INITIALIZED;
    enabled = 1;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
    (void)kind;
    enabled = 0;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiGetTimestamp(uint64_t *now) {
    *now = 123456789;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult result, const char **text) {
    (void)result;
    *text = "refused by the stand-in";
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record) {
    uint8_t *next = *record == NULL ? buffer : (uint8_t *)*record + sizeof(CUpti_ActivityKernel4);
    if (next + sizeof(CUpti_ActivityKernel4) > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (CUpti_Activity *)next;
    return CUPTI_SUCCESS;
}

/* Every queued record, in buffers the collector hands out, each given back. */
void fake_complete(void) {
    int i = 0;
    while (i < queued_count) {
        uint8_t *buffer = NULL;
        size_t size = 0, max_records = 0;
        requested(&buffer, &size, &max_records);
        if (buffer == NULL || size < sizeof(CUpti_ActivityKernel4)) return;
        buffers_seen++;
        for (size_t b = 0; b < size; ++b)
            if (buffer[b]) { dirty_buffers++; break; }
        size_t n = 0;
        while (i < queued_count && (n + 1) * sizeof(CUpti_ActivityKernel4) <= size) {
            CUpti_ActivityKernel4 *k = (CUpti_ActivityKernel4 *)(buffer + n * sizeof(CUpti_ActivityKernel4));
            k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
            k->correlationId = queued[i].correlation;
            k->name = queued[i].name;
            k->start = queued[i].start;
            k->end = queued[i].end;
            n++, i++;
        }
        completed(NULL, 0, buffer, size, n * sizeof(CUpti_ActivityKernel4));
    }
    queued_count = 0;
}

CUptiResult cuptiActivityFlushAll(uint32_t flag) {
    last_flag = (int)flag;
    fake_complete();
    return CUPTI_SUCCESS;
}

/* test controls */
void fake_queue(uint32_t correlation, const char *name, uint64_t start, uint64_t end) {
    if (queued_count < 16384) {
        Queued q = {correlation, name ? name : shared_name, start, end};
        queued[queued_count++] = q;
    }
}
void fake_name(const char *text) { strncpy(shared_name, text, sizeof shared_name - 1); }
int fake_enabled(void) { return enabled; }
int fake_zeroed_attribute(void) { return zeroed_attribute; }
int fake_dirty_buffers(void) { return dirty_buffers; }
int fake_buffers_seen(void) { return buffers_seen; }
int fake_last_flag(void) { return last_flag; }
