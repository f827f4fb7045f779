/* codeagent's judge for test programs (codeagent/harness/judge/process.py): preloaded (LD_PRELOAD) into
 * every process of a graded test run, it records how each process ended, one line per event, appended
 * to the file named by CODEAGENT_JUDGE_RECORDS:
 *   S pid ppid exe          the observer loaded (a new program image, or a fork: exe is "fork")
 *   M pid                   main was entered
 *   R pid status            main returned status
 *   E pid how status state  exit, _exit, _Exit or quick_exit was called (state: 0 main not entered,
 *                           1 main running, 2 main returned; a fork child inherits its parent's)
 *   W pid child status      the process reaped a child (the raw wait status)
 * Each line is one write(2) to a file opened with O_APPEND, so lines of concurrent processes do not mix.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int (*main_function)(int, char **, char **);

static int main_state;
static main_function real_main;

static void record(const char *format, ...) {
    const char *path = getenv("CODEAGENT_JUDGE_RECORDS");
    char line[640];
    va_list values;
    int length, descriptor;
    if (path == NULL || path[0] != '/')
        return;
    va_start(values, format);
    length = vsnprintf(line, sizeof line - 1, format, values);
    va_end(values);
    if (length < 0)
        return;
    if (length > (int)sizeof line - 2)
        length = (int)sizeof line - 2;
    line[length++] = '\n';
    descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (descriptor < 0)
        return;
    if (write(descriptor, line, (size_t)length) < 0) {
        /* nothing to do: a missing record is read as such */
    }
    close(descriptor);
}

__attribute__((constructor)) static void started(void) {
    char exe[512];
    ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ssize_t i;
    if (length < 0)
        length = 0;
    exe[length] = '\0';
    for (i = 0; i < length; i++)
        if (exe[i] <= ' ' || exe[i] == 0x7f)
            exe[i] = '?';
    record("S %d %d %s", (int)getpid(), (int)getppid(), length ? exe : "?");
}

static int observed_main(int argc, char **argv, char **environment) {
    int status;
    main_state = 1;
    record("M %d", (int)getpid());
    status = real_main(argc, argv, environment);
    main_state = 2;
    record("R %d %d", (int)getpid(), status);
    return status;
}

int __libc_start_main(main_function main, int argc, char **argv, void (*init)(void), void (*fini)(void),
                      void (*rtld_fini)(void), void *stack_end) {
    int (*real)(main_function, int, char **, void (*)(void), void (*)(void), void (*)(void), void *) =
        (int (*)(main_function, int, char **, void (*)(void), void (*)(void), void (*)(void), void *))
            dlsym(RTLD_NEXT, "__libc_start_main");
    real_main = main;
    return real(observed_main, argc, argv, init, fini, rtld_fini, stack_end);
}

#define ENDING(name)                                                                  \
    void name(int status) {                                                           \
        void (*real)(int) = (void (*)(int))dlsym(RTLD_NEXT, #name);                   \
        record("E %d " #name " %d %d", (int)getpid(), status, main_state);            \
        real(status);                                                                 \
        __builtin_unreachable();                                                      \
    }

ENDING(exit)
ENDING(_exit)
ENDING(_Exit)
ENDING(quick_exit)

pid_t fork(void) {
    pid_t (*real)(void) = (pid_t(*)(void))dlsym(RTLD_NEXT, "fork");
    pid_t child = real();
    if (child == 0)
        record("S %d %d fork", (int)getpid(), (int)getppid());
    return child;
}

static void reaped(pid_t child, int status) {
    if (child > 0 && (WIFEXITED(status) || WIFSIGNALED(status)))
        record("W %d %d %d", (int)getpid(), (int)child, status);
}

pid_t waitpid(pid_t pid, int *status, int options) {
    pid_t (*real)(pid_t, int *, int) = (pid_t(*)(pid_t, int *, int))dlsym(RTLD_NEXT, "waitpid");
    int local = 0;
    pid_t child = real(pid, status ? status : &local, options);
    reaped(child, status ? *status : local);
    return child;
}

pid_t wait4(pid_t pid, int *status, int options, struct rusage *usage) {
    pid_t (*real)(pid_t, int *, int, struct rusage *) =
        (pid_t(*)(pid_t, int *, int, struct rusage *))dlsym(RTLD_NEXT, "wait4");
    int local = 0;
    pid_t child = real(pid, status ? status : &local, options, usage);
    reaped(child, status ? *status : local);
    return child;
}

pid_t wait(int *status) {
    return waitpid(-1, status, 0);
}
