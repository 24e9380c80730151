#include "config.h"
#include "server/socket_activation.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <systemd/sd-daemon.h>

#include "util/log.h"

int socket_activation_fd(const char *configured_path, char *err, size_t errlen)
{
	/* 1: unset LISTEN_* so that children (FUSE servers) do not see them. */
	int n = sd_listen_fds(1);

	if (n == 0)
		return -1;
	if (n < 0) {
		snprintf(err, errlen, "socket activation: %s", strerror(-n));
		return -2;
	}
	if (n > 1) {
		snprintf(err, errlen, "socket activation: systemd passed %d sockets; squashd.socket "
			 "must listen on exactly one", n);
		return -2;
	}
	int fd = SD_LISTEN_FDS_START;
	if (sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, NULL, 0) <= 0) {
		snprintf(err, errlen, "socket activation: the socket systemd passed is not a listening "
			 "unix SOCK_SEQPACKET socket (use ListenSequentialPacket= in squashd.socket)");
		return -2;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		snprintf(err, errlen, "socket activation: %s", strerror(errno));
		return -2;
	}
	struct sockaddr_un addr;
	socklen_t len = sizeof(addr);
	memset(&addr, 0, sizeof(addr));
	if (getsockname(fd, (struct sockaddr *)&addr, &len) == 0 && addr.sun_path[0] &&
	    strncmp(addr.sun_path, configured_path, sizeof(addr.sun_path)))
		log_warning("the socket from systemd is %.*s but squashd.conf says socket = %s; "
			    "clients must use %.*s", (int)sizeof(addr.sun_path), addr.sun_path,
			    configured_path, (int)sizeof(addr.sun_path), addr.sun_path);
	return fd;
}
