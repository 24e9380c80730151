/* connect_flood SOCKET UID PROCS SECONDS: PROCS processes, each as UID,
 * connect to the unix socket SOCKET and hang up at once, over and over,
 * for SECONDS; prints the connections made, one line per process. A user
 * flooding squashd's listen backlog, for
 * tests/integration/test_bounded_work_per_user.py (a Python loop is too
 * slow to keep the backlog full on two CPUs). Gone with its parent. */
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static void flood(const struct sockaddr_un *a, double seconds)
{
	struct timespec t0;
	long made = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0;; i++) {
		if ((i & 255) == 0 && since(&t0) > seconds)
			break;
		int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

		if (s < 0)
			continue;
		made += connect(s, (const struct sockaddr *)a, sizeof(*a)) == 0;
		close(s);
	}
	printf("%ld\n", made);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	if (argc != 5 || strlen(argv[1]) >= sizeof(a.sun_path)) {
		fprintf(stderr, "usage: connect_flood SOCKET UID PROCS SECONDS\n");
		return 2;
	}
	strcpy(a.sun_path, argv[1]);
	uid_t uid = (uid_t)strtoul(argv[2], NULL, 10);
	int procs = atoi(argv[3]);
	double seconds = atof(argv[4]);

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (int i = 0; i < procs; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (setgroups(0, NULL) < 0 || setgid(uid) < 0 || setuid(uid) < 0) {
				perror("setuid");
				_exit(1);
			}
			flood(&a, seconds);
			_exit(0);
		}
	}
	int failed = 0, st;

	while (wait(&st) > 0)
		failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	return failed;
}
