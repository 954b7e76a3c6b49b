/* Workload driver for `cargo xtask bench` (compiled by the bench with `cc -O2`).
 *
 *   benchdrv fork   N PAR          N fork+exec(/bin/true) in PAR parallel workers
 *   benchdrv signal N              N signals ping-ponged between a parent and its child
 *   benchdrv selfsig N             N signals a process sends itself (kill(getpid())),
 *                                  each caught by a handler: no context switch, so
 *                                  a signal's own cost, the tracer's included
 *   benchdrv argv   N ARGC ARGLEN  N execs of /bin/true with ARGC args of ARGLEN bytes
 *   benchdrv stderr PROCS WRITES LEN  PROCS processes (2 at a time), each writing
 *                                  WRITES times LEN bytes to fd 2
 *   benchdrv preempt THREADS MILLIONS  THREADS threads spinning MILLIONS million
 *                                  iterations each while a monitor thread sends
 *                                  each running one SIGURG (tgkill) every 10 ms:
 *                                  Go's sysmon preempting busy goroutines (the
 *                                  fallback when no Go toolchain is installed)
 *   benchdrv time KEY TOOL -- CMD...  run CMD (stdio on /dev/null), print
 *                                  "@@tracer-vm bench KEY TOOL NS STATUS": the
 *                                  guest bench's clock (`cargo xtask bench --vm`)
 *
 * It only ever signals processes it forked itself. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static char *const true_argv[] = {"true", NULL};

static void die(const char *what) { perror(what); exit(2); }

static void wait_ok(pid_t pid) {
    int st;
    if (waitpid(pid, &st, 0) < 0) die("waitpid");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) { fprintf(stderr, "child failed: %#x\n", st); exit(3); }
}

static void run_true(char *const argv[]) {
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) { execv("/bin/true", argv); _exit(127); }
    wait_ok(pid);
}

static void fork_storm(long n, long par) {
    pid_t workers[256];
    if (par < 1 || par > 256) { fprintf(stderr, "PAR in 1..256\n"); exit(2); }
    for (long w = 0; w < par; w++) {
        long mine = n / par + (w < n % par);
        pid_t pid = fork();
        if (pid < 0) die("fork");
        if (pid == 0) {
            for (long i = 0; i < mine; i++) run_true(true_argv);
            _exit(0);
        }
        workers[w] = pid;
    }
    for (long w = 0; w < par; w++) wait_ok(workers[w]);
}

static void signal_storm(long n) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    if (sigprocmask(SIG_BLOCK, &set, NULL)) die("sigprocmask");
    long rounds = n / 2;
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) die("fork");
    int sig;
    if (child == 0) {
        for (long i = 0; i < rounds; i++) {
            if (sigwait(&set, &sig)) die("sigwait");
            if (kill(parent, SIGUSR2)) die("kill");
        }
        _exit(0);
    }
    for (long i = 0; i < rounds; i++) {
        if (kill(child, SIGUSR1)) die("kill");
        if (sigwait(&set, &sig)) die("sigwait");
    }
    wait_ok(child);
}

static volatile sig_atomic_t caught;

static void on_usr1(int sig) { (void)sig; caught++; }

static void self_signal_storm(long n) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL)) die("sigaction");
    pid_t self = getpid();
    for (long i = 0; i < n; i++)
        if (kill(self, SIGUSR1)) die("kill");
    /* Delivered before kill() returns (a signal to oneself, unblocked). */
    if (caught != n) { fprintf(stderr, "caught %ld of %ld\n", (long)caught, n); exit(3); }
}

static void argv_storm(long n, long argc, long arglen) {
    char **argv = calloc(argc + 2, sizeof *argv);
    char *arg = malloc(arglen + 1);
    if (!argv || !arg) die("malloc");
    memset(arg, 'a', arglen);
    arg[arglen] = 0;
    argv[0] = "true";
    for (long i = 1; i <= argc; i++) argv[i] = arg;
    for (long i = 0; i < n; i++) run_true(argv);
}

static void stderr_worker(long writes, long len) {
    char *buf = malloc(len);
    if (!buf) die("malloc");
    memset(buf, 'e', len);
    buf[len - 1] = '\n';
    for (long i = 0; i < writes; i++)
        if (write(2, buf, len) != len) _exit(4);
    _exit(0);
}

static void stderr_storm(long procs, long writes, long len) {
    pid_t running[2] = {0, 0};
    for (long i = 0; i < procs; i++) {
        int slot = i % 2;
        if (running[slot]) wait_ok(running[slot]);
        pid_t pid = fork();
        if (pid < 0) die("fork");
        if (pid == 0) stderr_worker(writes, len);
        running[slot] = pid;
    }
    for (int s = 0; s < 2; s++) if (running[s]) wait_ok(running[s]);
}

/* Go's runtime: sysmon preempts a goroutine that ran 10 ms with SIGURG via
 * tgkill; the handler runs on the busy thread and returns. */
#define PREEMPT_MAX 64
static _Atomic pid_t spin_tids[PREEMPT_MAX];
static _Atomic long spinning;
static long spin_millions;
static _Atomic unsigned long preempted;

static void on_urg(int sig) { (void)sig; preempted++; }

static void *spin(void *arg) {
    long me = (long)arg;
    spin_tids[me] = (pid_t)syscall(SYS_gettid);
    volatile unsigned long x = 0;
    for (long i = 0; i < spin_millions * 1000000L; i++) x += (unsigned long)i;
    spin_tids[me] = 0;
    spinning--;
    return NULL;
}

static void preempt_storm(long threads, long millions) {
    if (threads < 1 || threads > PREEMPT_MAX) { fprintf(stderr, "THREADS in 1..%d\n", PREEMPT_MAX); exit(2); }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_urg;
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGURG, &sa, NULL)) die("sigaction");
    spin_millions = millions;
    spinning = threads;
    pthread_t th[PREEMPT_MAX];
    for (long i = 0; i < threads; i++)
        if (pthread_create(&th[i], NULL, spin, (void *)i)) die("pthread_create");
    pid_t tgid = getpid();
    struct timespec tick = {0, 10 * 1000 * 1000};
    while (spinning > 0) {
        nanosleep(&tick, NULL);
        for (long i = 0; i < threads; i++) {
            pid_t tid = spin_tids[i];
            /* ESRCH: the thread finished between the read and the send. */
            if (tid && syscall(SYS_tgkill, tgid, tid, SIGURG) && errno != ESRCH) die("tgkill");
        }
    }
    for (long i = 0; i < threads; i++) pthread_join(th[i], NULL);
}

static long long now_ns(void) {
    struct timespec t;
    if (clock_gettime(CLOCK_MONOTONIC, &t)) die("clock_gettime");
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int time_cmd(int argc, char **argv) {
    if (argc < 6 || strcmp(argv[4], "--")) { fprintf(stderr, "usage: time KEY TOOL -- CMD...\n"); return 2; }
    long long start = now_ns();
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null < 0) _exit(126);
        dup2(null, 0); dup2(null, 1); dup2(null, 2);
        execv(argv[5], argv + 5);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) < 0) die("waitpid");
    long long ns = now_ns() - start;
    int status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    printf("@@tracer-vm bench %s %s %lld %d\n", argv[2], argv[3], ns, status);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "time")) return time_cmd(argc, argv);
    if (argc < 3) { fprintf(stderr, "usage: see source\n"); return 2; }
    /* The workers a CI job's runner forks hold a few fds; whatever the
     * harness above leaked (a high fd grows every copy of the fd table past
     * the one embedded in the kernel's files_struct, which decides how
     * tracer's stderr capture reads fd 2) is not theirs to inherit. */
    closefrom(3);
    long a = atol(argv[2]);
    long b = argc > 3 ? atol(argv[3]) : 1;
    long c = argc > 4 ? atol(argv[4]) : 1;
    if (!strcmp(argv[1], "fork")) fork_storm(a, b);
    else if (!strcmp(argv[1], "signal")) signal_storm(a);
    else if (!strcmp(argv[1], "selfsig")) self_signal_storm(a);
    else if (!strcmp(argv[1], "argv")) argv_storm(a, b, c);
    else if (!strcmp(argv[1], "stderr")) stderr_storm(a, b, c);
    else if (!strcmp(argv[1], "preempt")) preempt_storm(a, b);
    else { fprintf(stderr, "unknown mode %s\n", argv[1]); return 2; }
    return 0;
}
