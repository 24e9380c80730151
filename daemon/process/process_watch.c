#include "config.h"

#include "process/process_watch.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "array_grow.h"
#include "process/child_process.h"
#include "process/user_executor.h"
#include "util/log.h"

struct watched {
	int pidfd;
	pid_t pid;
	uid_t uid;
	process_exit_fn fn;
	void *arg;
};

/* A callback on its way to its user's thread. */
struct exited {
	process_exit_fn fn;
	void *arg;
	pid_t pid;
	int status;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct watched *items;
static size_t count, cap;
static int wake_fd = -1;
static bool started;

static void *watch_loop(void *unused);

/* Under lock. */
static int start_locked(void)
{
	pthread_t t;
	pthread_attr_t attr;
	int rc;

	if (started)
		return 0;
	wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (wake_fd < 0)
		return -1;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	rc = pthread_create(&t, &attr, watch_loop, NULL);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		close(wake_fd);
		wake_fd = -1;
		return -1;
	}
	started = true;
	return 0;
}

int process_watch_add(int pidfd, pid_t pid, uid_t uid, process_exit_fn fn, void *arg)
{
	uint64_t one = 1;
	int rc = -1;

	pthread_mutex_lock(&lock);
	if (start_locked() == 0 && array_reserve(&items, &cap, count + 1, sizeof(*items), 64) == 0) {
		items[count++] = (struct watched){ pidfd, pid, uid, fn, arg };
		rc = 0;
	}
	pthread_mutex_unlock(&lock);
	if (rc == 0 && write(wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warning("cannot wake the process watcher: %s", strerror(errno));
	return rc;
}

static void call_back(void *arg)
{
	struct exited *x = arg;

	x->fn(x->arg, x->pid, x->status);
	free(x);
}

/* Hands w's callback to its user's thread; inline only when that cannot
 * be had (out of memory or threads). */
static void dispatch(const struct watched *w, int status)
{
	struct exited *x = malloc(sizeof(*x));

	if (x) {
		*x = (struct exited){ w->fn, w->arg, w->pid, status };
		if (user_executor_run(w->uid, call_back, x) == 0)
			return;
		free(x);
	}
	log_warning("process watcher: no thread for uid %u's callback; running it here",
		    (unsigned)w->uid);
	w->fn(w->arg, w->pid, status);
}

static void *watch_loop(void *unused)
{
	struct pollfd *pfd = NULL;
	size_t pfd_cap = 0;

	(void)unused;
	for (;;) {
		size_t n;

		pthread_mutex_lock(&lock);
		n = count;
		/* Out of memory: watches those it has room for this time. */
		if (array_reserve(&pfd, &pfd_cap, n + 1, sizeof(*pfd), 64) < 0)
			n = pfd_cap ? pfd_cap - 1 : 0;
		for (size_t i = 0; i < n; i++)
			pfd[i + 1] = (struct pollfd){ .fd = items[i].pidfd, .events = POLLIN };
		pthread_mutex_unlock(&lock);
		if (!pfd) {
			sleep(1); /* out of memory: try again shortly */
			continue;
		}
		pfd[0] = (struct pollfd){ .fd = wake_fd, .events = POLLIN };
		if (poll(pfd, n + 1, -1) < 0) {
			if (errno != EINTR)
				log_error("process watcher: poll: %s", strerror(errno));
			continue;
		}
		if (pfd[0].revents & POLLIN) {
			uint64_t v;

			while (read(wake_fd, &v, sizeof(v)) > 0)
				;
		}
		for (size_t i = 0; i < n; i++) {
			struct watched w;
			int status = -1;
			bool found = false;

			if (!(pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			/* Entries only ever get appended or removed here, so the
			 * descriptor identifies the entry. */
			pthread_mutex_lock(&lock);
			for (size_t j = 0; j < count; j++) {
				if (items[j].pidfd == pfd[i + 1].fd) {
					w = items[j];
					items[j] = items[--count];
					found = true;
					break;
				}
			}
			pthread_mutex_unlock(&lock);
			if (!found)
				continue;
			child_wait(w.pidfd, 0, &status);
			close(w.pidfd);
			if (w.fn)
				dispatch(&w, status);
		}
	}
	return NULL;
}
