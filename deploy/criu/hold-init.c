/*
 * PID 1 of an agent container that can be checkpointed (docs/decisions/0049-...): the container's init, as docker-init
 * (tini) is, with one difference. A checkpoint dumps the agent and ends its processes while the container stays
 * running, so that Docker, the reconciler, the doctor and backups see the same container throughout; a restore puts
 * the agent back into the same pid namespace with the same pid, and the kernel makes it this init's child again.
 * So this init does not exit when the agent ends after the host said "hold" (SIGUSR1 sent from outside the
 * container: a process inside, the agent included, cannot arm it), and waits for the agent's return instead.
 * SIGUSR2 from outside disarms it again: a dump that failed leaves the agent running, and its end is the container's.
 *
 * Otherwise: it starts argv[1..] in a session of its own (CRIU restores a session leader without --shell-job),
 * forwards SIGTERM/SIGINT/SIGHUP/SIGQUIT to it, reaps every orphan, and exits as the agent did (128+signal).
 * Static (gcc -static), so it runs in any image; deploy/criu/build.sh builds it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t hold;
static volatile sig_atomic_t forward;
static pid_t agent;

static void on_hold(int sig, siginfo_t *info, void *ctx) {
  (void)ctx;
  /* A sender in an ancestor pid namespace (the host) shows as pid 0; anyone in the container has a pid here. */
  if (info->si_pid == 0) hold = sig == SIGUSR1;
}

static void on_forward(int sig) { forward = sig; }

static int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: hold-init command [args...]\n");
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_hold;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGUSR1, &sa, NULL);
  sigaction(SIGUSR2, &sa, NULL);
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_forward;
  int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  for (unsigned i = 0; i < sizeof forwarded / sizeof *forwarded; i++) sigaction(forwarded[i], &sa, NULL);

  agent = fork();
  if (agent < 0) {
    perror("hold-init: fork");
    return 1;
  }
  if (agent == 0) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGUSR1, &dfl, NULL);
    sigaction(SIGUSR2, &dfl, NULL);
    for (unsigned i = 0; i < sizeof forwarded / sizeof *forwarded; i++) sigaction(forwarded[i], &dfl, NULL);
    setsid();
    execvp(argv[1], argv + 1);
    perror("hold-init: exec");
    _exit(127);
  }

  for (;;) {
    if (forward) {
      int sig = forward;
      forward = 0;
      /* Held and no agent (a restore that failed): a stop ends the container. */
      if (kill(agent, sig) != 0 && errno == ESRCH) return 128 + sig;
    }
    int status;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid == agent) {
      if (!hold) return exit_code(status);
      /* Checkpointed: the restored agent comes back with this pid, as this init's child. */
      hold = 0;
      continue;
    }
    if (pid < 0 && errno == ECHILD) sleep(1);
  }
}
