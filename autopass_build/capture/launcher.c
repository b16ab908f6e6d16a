/* autopass's compiler launcher: the wrapper's way in without a Python start per compile.

   `autopass record`, `apply` and `verify` put this program where the build finds its
   compiler (autopass-cc, autopass-c++, and the gcc/cc/clang names linked to them) and
   serve the wrapper's own Python code on a socket for the length of the build
   (AUTOPASS_SERVER, capture/server.py).  Each call sends its arguments, folder and
   environment there and does what it is told: run a command (with our stdin, stdout and
   stderr, or with its output kept and sent back, or detached and quiet), write bytes,
   exec a command, exit.  All decisions stay in Python; this only runs things.  Without
   a server, or when the server goes away before anything ran, it execs the Python
   wrapper beside it with the same arguments, so the behaviour is the wrapper's either
   way; a server gone after something ran fails the call, in one line (what ran cannot
   be run again, nor its end reported).

   Called as CMake's compiler launcher (cmake/AutoPass.cmake: the first argument is
   --autopass-mode=...) no autopass process runs the build, so there is no AUTOPASS_SERVER:
   the launcher then uses the server of its own folder (socket_for_self), started on
   demand (capture/on_demand.py, gone after minutes idle).
   When none answers, it starts one, detached, at most once per START_PAUSE seconds
   (a server that cannot start must not cost a Python start per compile twice over),
   and this call goes to the Python wrapper as before.

   Protocol: every message is a list of byte strings, each sent as a 4-byte
   little-endian length and the bytes, the list closed by an empty-length marker
   (0xFFFFFFFF).  Call: "autopass-launcher-1", argv0, cwd, stderr-is-a-terminal ("0" or
   "1"), the argument count and the arguments, the environment count and "K=V" strings.
   Orders: ["run", how, timeout_ms, fixed_layout, stderr_path, path, env count, env...,
   argv...] with how one of "inherit", "buffered", "quiet"; the answer is ["status", n]
   (n as waitstatus_to_exitcode: negative for a signal), with stdout and stderr for
   "buffered".  ["write", stdout, stderr]; ["exec", path, env count, env..., argv...];
   ["exit", n] (negative: die by that signal); ["python"]. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define END_OF_LIST 0xFFFFFFFFu
#define MAX_FIELDS 65536
#define START_PAUSE 10

extern char **environ;

typedef struct {
    char **items;     /* NUL-terminated copies; items[n] == NULL */
    uint32_t *sizes;
    size_t n;
} List;

static int server = -1;
static struct sigaction pipe_was;   /* SIGPIPE as the build gave it, for the wrapper */
static pid_t child = 0;
static int child_own_group = 0;
static char *const *original_argv;

/* ---- talking to the server ------------------------------------------------------- */
static int write_all(int fd, const void *data, size_t size) {
    const char *p = data;
    while (size > 0) {
        ssize_t n = write(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        size -= (size_t)n;
    }
    return 0;
}

static int read_all(int fd, void *data, size_t size) {
    char *p = data;
    while (size > 0) {
        ssize_t n = read(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        size -= (size_t)n;
    }
    return 0;
}

static int send_field(const void *data, uint32_t size) {
    unsigned char head[4] = {size & 0xff, (size >> 8) & 0xff, (size >> 16) & 0xff, size >> 24};
    return write_all(server, head, 4) || write_all(server, data, size);
}

static int send_text(const char *text) { return send_field(text, (uint32_t)strlen(text)); }

static int send_number(long value) {
    char text[32];
    snprintf(text, sizeof text, "%ld", value);
    return send_text(text);
}

static int send_end(void) {
    unsigned char end[4] = {0xff, 0xff, 0xff, 0xff};
    return write_all(server, end, 4);
}

static int receive(List *list) {
    size_t capacity = 16;
    list->n = 0;
    list->items = malloc(capacity * sizeof *list->items);
    list->sizes = malloc(capacity * sizeof *list->sizes);
    for (;;) {
        unsigned char head[4];
        if (!list->items || !list->sizes || read_all(server, head, 4)) return -1;
        uint32_t size = head[0] | head[1] << 8 | head[2] << 16 | (uint32_t)head[3] << 24;
        if (size == END_OF_LIST) break;
        if (list->n + 2 > capacity) {
            if (capacity >= MAX_FIELDS) return -1;
            capacity *= 2;
            list->items = realloc(list->items, capacity * sizeof *list->items);
            list->sizes = realloc(list->sizes, capacity * sizeof *list->sizes);
            if (!list->items || !list->sizes) return -1;
        }
        char *item = malloc((size_t)size + 1);
        if (!item || read_all(server, item, size)) return -1;
        item[size] = 0;
        list->items[list->n] = item;
        list->sizes[list->n++] = size;
    }
    list->items[list->n] = NULL;
    return 0;
}

/* ---- when there is no server: the Python wrapper ---------------------------------- */
/* The Python wrapper lies beside this program (build_env.py writes both). */
static void exec_python(void) {
    char script[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", script, PATH_MAX);
    if (n > 0) {
        script[n] = 0;
        char *slash = strrchr(script, '/');
        strcpy(slash ? slash + 1 : script, "autopass-wrapper.py");
        setenv("AUTOPASS_ARGV0", original_argv[0], 1);
        sigaction(SIGPIPE, &pipe_was, NULL);
        execv(script, original_argv);
    }
    fprintf(stderr, "%s: error: autopass's launcher cannot start the wrapper beside it "
                    "(%s): reinstall autopass, or set AUTOPASS_MODE=off and run the real "
                    "compiler\n", original_argv[0], strerror(errno));
    exit(2);
}

static int connect_server(const char *path) {
    if (!path || !*path || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strcpy(address.sun_path, path);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- the server on demand (CMake's launcher form) ------------------------------------ */
/* `name` in this program's own folder, into `out`; -1 when that cannot be known. */
static int beside_self(char *out, size_t size, const char *name) {
    ssize_t n = readlink("/proc/self/exe", out, size - 1);
    if (n <= 0) return -1;
    out[n] = 0;
    char *slash = strrchr(out, '/');
    if (!slash || (size_t)(slash + 1 - out) + strlen(name) + 1 > size) return -1;
    strcpy(slash + 1, name);
    return 0;
}

/* The socket of the server for this program's folder: /tmp/autopass-UID/HASH.sock, HASH
   the FNV-1a hash of the folder (a path in the folder itself can pass the 107 bytes a
   socket's path may have); its start stamp beside it as HASH.started.  -1 when the
   folder of sockets is not this user's alone. */
static int socket_for_self(char *out, size_t size) {
    char self[PATH_MAX];
    if (beside_self(self, sizeof self, "")) return -1;
    uint64_t hash = 0xcbf29ce484222325ULL;      /* FNV-1a, 64 bits */
    for (const char *c = self; *c; c++) {
        hash ^= (unsigned char)*c;
        hash *= 0x100000001b3ULL;
    }
    char folder[64];
    struct stat st;
    snprintf(folder, sizeof folder, "/tmp/autopass-%u", (unsigned)getuid());
    if (mkdir(folder, 0700) != 0 && errno != EEXIST) return -1;
    if (lstat(folder, &st) || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
        (st.st_mode & 077))
        return -1;
    snprintf(out, size, "%s/%016llx.sock", folder, (unsigned long long)hash);
    return 0;
}

/* Starts `autopass-wrapper.py --autopass-serve SOCKET` in a session of its own, with no
   file of the build open: an inherited pipe would keep make or ninja waiting for it. */
static void start_server(const char *socket_path) {
    char stamp[PATH_MAX], script[PATH_MAX];
    struct stat started;
    size_t stem = strlen(socket_path) - strlen(".sock");
    if (beside_self(script, sizeof script, "autopass-wrapper.py") || stem + 9 > sizeof stamp)
        return;
    memcpy(stamp, socket_path, stem);
    strcpy(stamp + stem, ".started");
    if (stat(stamp, &started) == 0 && time(NULL) - started.st_mtime < START_PAUSE) return;
    int fd = open(stamp, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    futimens(fd, NULL);
    close(fd);
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        if (fork() != 0) _exit(0);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        if (syscall(SYS_close_range, 3, ~0U, 0) != 0)
            for (int other = 3; other < 4096; other++) close(other);
        for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
        char *args[] = {script, "--autopass-serve", (char *)socket_path, NULL};
        execv(script, args);
        _exit(127);
    }
    if (pid > 0)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
}

static int on_demand_server(int argc, char **argv) {
    char path[PATH_MAX];
    if (argc < 2 || strncmp(argv[1], "--autopass-mode=", 16) != 0 ||
        socket_for_self(path, sizeof path))
        return -1;
    int fd = connect_server(path);
    if (fd < 0) start_server(path);
    return fd;
}

/* ---- running what the server says -------------------------------------------------- */
static void forward(int signum) {
    if (child > 0) kill(child_own_group ? -child : child, signum);
}

static void die_by(int signum) {
    signal(signum, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signum);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(signum);
    _exit(128 + signum);
}

static long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* Waits for the child; kills its group when `timeout_ms` (> 0) passes.  Returns the
   status as Python's waitstatus_to_exitcode would. */
static int wait_child(long timeout_ms, int *timed_out) {
    int status = 0, reaped = 0;
    if (timeout_ms > 0) {
        long deadline = now_ms() + timeout_ms;
        int pidfd = (int)syscall(SYS_pidfd_open, child, 0);
        while (!(reaped = waitpid(child, &status, WNOHANG) == child)) {
            long left = deadline - now_ms();
            if (left <= 0) {
                kill(-child, SIGKILL);
                *timed_out = 1;
                break;
            }
            if (pidfd >= 0) {
                struct pollfd exited = {.fd = pidfd, .events = POLLIN};
                poll(&exited, 1, (int)(left > 100000 ? 100000 : left));
            } else {
                struct timespec pause = {0, 5000000};
                nanosleep(&pause, NULL);
            }
        }
        if (pidfd >= 0) close(pidfd);
    }
    if (!reaped)
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    child = 0;
    return WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
}

/* A NULL-terminated copy of `count` pointers from `from`. */
static char **list_of(char **from, size_t count) {
    char **list = malloc((count + 1) * sizeof *list);
    if (!list) return NULL;
    memcpy(list, from, count * sizeof *list);
    list[count] = NULL;
    return list;
}

static int run(List *order, int *out_fd, int *err_fd, int *timed_out) {
    const char *how = order->items[1];
    long timeout_ms = atol(order->items[2]);
    int fixed_layout = order->items[3][0] == '1';
    const char *stderr_path = order->items[4];
    const char *path = order->items[5];
    size_t env_count = (size_t)atol(order->items[6]);
    if (7 + env_count >= order->n) return 127;
    char **env = list_of(order->items + 7, env_count);
    char **argv = order->items + 7 + env_count;
    int buffered = strcmp(how, "buffered") == 0, quiet = strcmp(how, "quiet") == 0;
    if (!env) return 127;
    if (buffered) {
        *out_fd = memfd_create("stdout", MFD_CLOEXEC);
        *err_fd = memfd_create("stderr", MFD_CLOEXEC);
        if (*out_fd < 0 || *err_fd < 0) return 127;
    }
    child_own_group = timeout_ms > 0 || quiet;
    child = fork();
    if (child == 0) {
        if (quiet) setsid();
        else if (child_own_group) setpgid(0, 0);
        if (fixed_layout) personality(personality(0xffffffff) | ADDR_NO_RANDOMIZE);
        if (buffered) {
            dup2(*out_fd, 1);
            dup2(*err_fd, 2);
        } else if (quiet) {
            int null = open("/dev/null", O_RDWR);
            int err = *stderr_path ? open(stderr_path, O_WRONLY | O_CREAT | O_TRUNC, 0600)
                                   : null;
            dup2(null, 0);
            dup2(null, 1);
            dup2(err < 0 ? null : err, 2);
        }
        for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
        execve(path, argv, env);
        _exit(errno == ENOENT ? 127 : 126);
    }
    free(env);
    if (child < 0) return 127;
    return wait_child(timeout_ms, timed_out);
}

static int send_fd_contents(int fd) {
    if (fd < 0) return send_field("", 0);
    off_t size = lseek(fd, 0, SEEK_END);
    if (size < 0 || size > 0x7fffffff) return -1;
    char *data = malloc((size_t)size + 1);
    if (!data || pread(fd, data, (size_t)size, 0) != size) return -1;
    int failed = send_field(data, (uint32_t)size);
    free(data);
    close(fd);
    return failed;
}

static void write_out(int fd, const char *data, uint32_t size) {
    if (size) write_all(fd, data, size);
}

/* The server went away (killed, its autopass stopped) after something ran for this call:
   that cannot be done again, nor reported; the call fails, saying so, with the status
   of what ran when it failed. */
static int lost_server(int last_status) {
    fprintf(stderr, "autopass: error: lost the autopass process that runs this "
                    "build (interrupted?)\n");
    if (last_status < 0) die_by(-last_status);
    return last_status ? last_status : 1;
}

int main(int argc, char **argv) {
    (void)argc;
    original_argv = argv;
    /* a server gone mid-call must be an error from a write, not a silent death */
    struct sigaction ignore = {.sa_handler = SIG_IGN};
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, &pipe_was);
    if (getenv("AUTOPASS_WRAPPER_ACTIVE")) exec_python();    /* the wrapper says why */
    server = connect_server(getenv("AUTOPASS_SERVER"));
    if (server < 0) server = on_demand_server(argc, argv);
    if (server < 0) exec_python();
    char cwd[8192];
    if (!getcwd(cwd, sizeof cwd)) exec_python();
    size_t env_count = 0;
    while (environ[env_count]) env_count++;
    int failed = send_text("autopass-launcher-1") || send_text(argv[0]) || send_text(cwd) ||
                 send_text(isatty(2) ? "1" : "0") || send_number(argc - 1);
    for (int i = 1; i < argc && !failed; i++) failed = send_text(argv[i]);
    failed = failed || send_number((long)env_count);
    for (size_t i = 0; i < env_count && !failed; i++) failed = send_text(environ[i]);
    if (failed || send_end()) exec_python();

    int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++) {
        struct sigaction action = {.sa_handler = forward};
        sigemptyset(&action.sa_mask);
        sigaction(forwarded[i], &action, NULL);
    }
    int ran = 0, last_status = 0;
    for (;;) {
        List order;
        if (receive(&order) || order.n == 0) {
            if (!ran) exec_python();      /* nothing happened yet: Python does it all */
            return lost_server(last_status);
        }
        const char *what = order.items[0];
        if (strcmp(what, "python") == 0 && !ran) {
            exec_python();
        } else if (strcmp(what, "run") == 0 && order.n >= 8) {
            int out_fd = -1, err_fd = -1, timed_out = 0;
            last_status = run(&order, &out_fd, &err_fd, &timed_out);
            ran = 1;
            if (send_text("status") || send_number(last_status) ||
                send_text(timed_out ? "1" : "0") ||
                send_fd_contents(out_fd) || send_fd_contents(err_fd) || send_end())
                return lost_server(last_status);
        } else if (strcmp(what, "write") == 0 && order.n == 3) {
            write_out(1, order.items[1], order.sizes[1]);
            write_out(2, order.items[2], order.sizes[2]);
        } else if (strcmp(what, "exec") == 0 && order.n >= 4) {
            size_t count = (size_t)atol(order.items[2]);
            if (3 + count >= order.n) return 127;
            char **env = list_of(order.items + 3, count);
            char **args = order.items + 3 + count;
            char *path = order.items[1];
            if (!env) return 127;
            for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
            close(server);
            execve(path, args, env);
            fprintf(stderr, "%s: error: cannot run %s: %s\n", argv[0], path, strerror(errno));
            return 127;
        } else if (strcmp(what, "exit") == 0 && order.n == 2) {
            int code = atoi(order.items[1]);
            if (code < 0) die_by(-code);
            return code;
        } else {
            fprintf(stderr, "autopass: error: the launcher got an order it does not know "
                            "(%s): is autopass installed twice?\n", what);
            return 2;
        }
    }
}
