/* The C smoke driver's RPC part (mtp_smoke.c built with LLAMA_SMOKE_RPC and linked with
 * libggml-rpc), for platforms with no Python here (windows-x86_64 under wine). It plays both
 * sides of llama.cpp's RPC backend with the build under test:
 *
 * usage: mtp_smoke --rpc-serve ENDPOINT N_THREADS
 *   a worker: serves this machine's CPU device on ENDPOINT (host:port) with
 *   ggml_backend_rpc_start_server, after printing "rpc-server: serving CPU on ENDPOINT, process
 *   PID" (the id this platform's processes know it by). It never returns.
 *
 * usage: mtp_smoke --rpc-devices ENDPOINTS
 *   adds each server (comma-separated host:port) and prints one JSON line with the devices they
 *   serve: name, description, endpoint, memory free and total.
 *
 * usage: mtp_smoke --rpc ENDPOINTS N_GPU_LAYERS [--kill-after-first PID] MODEL_PATH ...
 *   the usual run (see mtp_smoke.c) with the target model's layers split as the runtime's
 *   Model(rpc_servers=ENDPOINTS, n_gpu_layers=N, tensor_split=[1]*servers) splits them: the
 *   servers' devices in order, this machine's CPU holding the rest; draft models stay local.
 *   llama.cpp's log goes to stderr (its buffer lines name each worker). With --kill-after-first,
 *   the process PID (a worker) is killed once the first token is out: llama.cpp then ends this
 *   process, which is what the host checks.
 *
 * There is no typed refusal here: ggml_backend_rpc_add_server aborts on a port where nothing
 * listens or a server of another protocol version; the runtime's own checks before it are
 * Python's and run where Python runs. The host runs those cases in children to record that
 * llama.cpp ends the process on this platform too.
 */
#define _POSIX_C_SOURCE 200809L

#include "mtp_smoke_rpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "ggml-rpc.h"

#ifdef _WIN32
#    include <windows.h>
#else
#    include <signal.h>
#    include <sys/types.h>
#    include <unistd.h>
#endif

#define SMOKE_RPC_MAX_DEVICES 16
#define SMOKE_RPC_ENDPOINT_MAX 256

static ggml_backend_dev_t g_devices[SMOKE_RPC_MAX_DEVICES + 1]; /* NULL-terminated */
static char g_endpoints[SMOKE_RPC_MAX_DEVICES][SMOKE_RPC_ENDPOINT_MAX];
static int g_n_devices;
static int g_active;
static int g_n_gpu_layers;
static float * g_tensor_split;
static long g_kill_pid;

static long process_id(void) {
#ifdef _WIN32
    return (long) GetCurrentProcessId();
#else
    return (long) getpid();
#endif
}

static int kill_process(long pid) {
#ifdef _WIN32
    HANDLE process = OpenProcess(PROCESS_TERMINATE, FALSE, (DWORD) pid);
    if (process == NULL) {
        return 0;
    }
    const BOOL done = TerminateProcess(process, 9);
    CloseHandle(process);
    return done != 0;
#else
    return kill((pid_t) pid, SIGKILL) == 0;
#endif
}

/* Every ENDPOINT of a comma-separated list added to ggml, their devices in g_devices. */
static int add_servers(const char * list) {
    const char * at = list;
    g_n_devices = 0;
    while (*at != '\0') {
        const char * comma = strchr(at, ',');
        const size_t n = comma != NULL ? (size_t) (comma - at) : strlen(at);
        char endpoint[SMOKE_RPC_ENDPOINT_MAX];
        if (n == 0 || n >= sizeof endpoint) {
            fprintf(stderr, "rpc: bad endpoint list %s\n", list);
            return 0;
        }
        memcpy(endpoint, at, n);
        endpoint[n] = '\0';
        ggml_backend_reg_t reg = ggml_backend_rpc_add_server(endpoint);
        const size_t count = reg != NULL ? ggml_backend_reg_dev_count(reg) : 0;
        if (count == 0) {
            fprintf(stderr, "rpc: %s serves no device\n", endpoint);
            return 0;
        }
        for (size_t i = 0; i < count; ++i) {
            if (g_n_devices == SMOKE_RPC_MAX_DEVICES) {
                fprintf(stderr, "rpc: more than %d devices\n", SMOKE_RPC_MAX_DEVICES);
                return 0;
            }
            snprintf(g_endpoints[g_n_devices], SMOKE_RPC_ENDPOINT_MAX, "%s", endpoint);
            g_devices[g_n_devices++] = ggml_backend_reg_dev_get(reg, i);
        }
        at += n;
        at += *at == ',' ? 1 : 0;
    }
    g_devices[g_n_devices] = NULL;
    return g_n_devices > 0;
}

static void print_json_string(const char * s) {
    putchar('"');
    for (; *s != '\0'; ++s) {
        const unsigned char c = (unsigned char) *s;
        if (c == '"' || c == '\\') {
            printf("\\%c", c);
        } else if (c < 0x20) {
            printf("\\u%04x", c);
        } else {
            putchar(c);
        }
    }
    putchar('"');
}

int smoke_rpc_serve_main(int argc, char ** argv) {
    if (argc != 4 || atoi(argv[3]) < 1) {
        fprintf(stderr, "usage: mtp_smoke --rpc-serve ENDPOINT N_THREADS\n");
        return 2;
    }
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (cpu == NULL) {
        fprintf(stderr, "rpc-server: no CPU device\n");
        return 1;
    }
    printf("rpc-server: serving CPU on %s, process %ld\n", argv[2], process_id());
    fflush(stdout);
    ggml_backend_rpc_start_server(argv[2], NULL, (size_t) atoi(argv[3]), 1, &cpu);
    fprintf(stderr, "rpc-server: the server stopped\n");
    return 1;
}

int smoke_rpc_devices_main(int argc, char ** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: mtp_smoke --rpc-devices ENDPOINTS\n");
        return 2;
    }
    if (!add_servers(argv[2])) {
        printf("{\"ok\": false, \"error\": \"the servers could not be added\"}\n");
        return 1;
    }
    printf("{\"ok\": true, \"devices\": [");
    for (int i = 0; i < g_n_devices; ++i) {
        size_t free_bytes = 0;
        size_t total_bytes = 0;
        ggml_backend_dev_memory(g_devices[i], &free_bytes, &total_bytes);
        printf("%s{\"name\": ", i > 0 ? ", " : "");
        print_json_string(ggml_backend_dev_name(g_devices[i]));
        printf(", \"description\": ");
        print_json_string(ggml_backend_dev_description(g_devices[i]));
        printf(", \"endpoint\": ");
        print_json_string(g_endpoints[i]);
        printf(", \"memory_free\": %zu, \"memory_total\": %zu}", free_bytes, total_bytes);
    }
    printf("]}\n");
    return 0;
}

int smoke_rpc_split_arguments(int * argc, char *** argv, size_t max_devices) {
    char ** args = *argv;
    if (*argc < 4 || strcmp(args[1], "--rpc") != 0) {
        return 1; /* no split asked for */
    }
    const int n_gpu_layers = atoi(args[3]);
    int used = 3;
    if (*argc >= 6 && strcmp(args[4], "--kill-after-first") == 0) {
        g_kill_pid = atol(args[5]);
        used = 5;
    }
    if (n_gpu_layers < 0 || !add_servers(args[2]) || (size_t) g_n_devices > max_devices) {
        return 0;
    }
    g_tensor_split = calloc(max_devices, sizeof *g_tensor_split);
    if (g_tensor_split == NULL) {
        return 0;
    }
    for (int i = 0; i < g_n_devices; ++i) {
        g_tensor_split[i] = 1.0f;
    }
    g_n_gpu_layers = n_gpu_layers;
    g_active = 1;
    /* the program's own name stays first; the split's arguments are taken out */
    args[used] = args[0];
    *argv = args + used;
    *argc -= used;
    return 1;
}

int smoke_rpc_active(void) {
    return g_active;
}

void smoke_rpc_model_params(struct llama_model_params * params) {
    if (!g_active) {
        return;
    }
    params->devices = g_devices;
    params->n_gpu_layers = g_n_gpu_layers;
    params->tensor_split = g_tensor_split;
}

void smoke_rpc_after_token(void) {
    if (g_kill_pid <= 0) {
        return;
    }
    const long pid = g_kill_pid;
    g_kill_pid = 0;
    fprintf(stderr, "rpc: killing the worker, process %ld: %s\n", pid,
            kill_process(pid) ? "done" : "failed");
    fflush(stderr);
}
