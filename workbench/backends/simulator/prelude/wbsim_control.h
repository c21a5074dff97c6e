/* What the worker and the notebook process share: the requests on the pipe
 * and the layout of the control page at the start of the device arena.
 * workbench/backends/simulator/protocol.py mirrors every name here (Op,
 * FaultKind, FaultRecord, ControlPage); a test compares the two. */
#ifndef WBSIM_CONTROL_H
#define WBSIM_CONTROL_H
#include <stdint.h>

#define WBSIM_CONTROL_MAGIC 0x57425349u
#define WBSIM_PRINTF_OFFSET 65536u
#define WBSIM_PRINTF_BYTES (1u << 20)
#define WBSIM_ARENA_RESERVED (2u << 20)

enum wbsim_op {
    WBSIM_OP_LOAD = 1, WBSIM_OP_LAUNCH, WBSIM_OP_SYMBOL_WRITE, WBSIM_OP_SYMBOL_READ,
    WBSIM_OP_INSTRUMENTED_LAUNCH
};

enum wbsim_fault_kind {
    WBSIM_FAULT_NONE = 0, WBSIM_FAULT_SIGNAL, WBSIM_FAULT_TRAP, WBSIM_FAULT_ASSERT,
    WBSIM_FAULT_DEADLOCK, WBSIM_FAULT_TIMEOUT, WBSIM_FAULT_ASAN, WBSIM_FAULT_ERROR,
    WBSIM_FAULT_UNSUPPORTED
};

typedef struct wbsim_fault {          /* offset 64 in the control page */
    int32_t kind;                     /* 64 */
    int32_t signo;                    /* 68 */
    int32_t has_block;                /* 72 */
    int32_t has_thread;               /* 76 */
    uint32_t block[3];                /* 80 */
    uint32_t thread[3];               /* 92 */
    uint64_t address;                 /* 104 */
    int32_t line;                     /* 112 */
    int32_t reserved;                 /* 116 */
    char kernel[128];                 /* 120 */
    char message[1024];               /* 248 */
} wbsim_fault;

typedef struct wbsim_control {
    uint64_t magic;                   /* 0 */
    uint64_t printf_len;              /* 8: bytes claimed (may exceed capacity) */
    uint64_t printf_dropped;          /* 16 */
    uint64_t printf_capacity;         /* 24 */
    uint64_t printf_committed;        /* 32: bytes of whole messages in the buffer */
    uint64_t reserved[3];             /* 40 */
    wbsim_fault fault;                /* 64 */
} wbsim_control;
#endif
