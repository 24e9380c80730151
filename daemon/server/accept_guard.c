#include "config.h"
#include "server/accept_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "util/log.h"

static int reserve_fd = -1;
static long long paused_until, last_warning;
static unsigned long starved_since_warning;

void accept_guard_init(void)
{
	if (reserve_fd < 0)
		reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void accept_guard_refill(void)
{
	accept_guard_init();
}

long long accept_guard_paused_until(void)
{
	return paused_until > squash_now_ms() ? paused_until : 0;
}

static void out_of_descriptors(int err)
{
	long long now = squash_now_ms();

	paused_until = now + ACCEPT_PAUSE_MS;
	starved_since_warning++;
	if (last_warning && now - last_warning < ACCEPT_WARN_MS)
		return;
	log_warning("accept: %s: squashd is out of descriptors; refused %lu connection(s) since the "
		    "last warning, accepting again every %d ms (is a user over max_fds_per_user, or "
		    "LimitNOFILE too low?)", strerror(err), starved_since_warning, ACCEPT_PAUSE_MS);
	last_warning = now;
	starved_since_warning = 0;
}

int accept_guarded(int listen_fd, bool *starved)
{
	*starved = false;
	if (accept_guard_paused_until())
		return -1;
	int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd >= 0 || errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return fd;
	int err = errno;
	if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM) {
		log_warning("accept: %s", strerror(err));
		return -1;
	}
	out_of_descriptors(err);
	if (reserve_fd < 0)
		return -1;
	close(reserve_fd);
	reserve_fd = -1;
	fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	*starved = fd >= 0;
	if (fd < 0)
		accept_guard_refill();
	return fd;
}
