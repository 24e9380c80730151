/* Refusing descriptors passed over a unix socket (SCM_RIGHTS).
 *
 * A process that sends squashd a descriptor makes squashd hold a file of
 * its choosing; when squashd lets go of it (the kernel closes descriptors
 * a recvmsg has no room for, and those in messages never read when the
 * socket closes), the file's release runs on squashd's thread and may
 * wait: a TCP socket with SO_LINGER and unsent data waits the linger
 * time, a FUSE file of a stopped server waits for ever. Linux 6.16 lets
 * a receiver refuse them (SO_PASSRIGHTS = 0): the sender's sendmsg then
 * fails with EPERM and nothing reaches the socket. */
#ifndef SQUASH_PASSED_FDS_H
#define SQUASH_PASSED_FDS_H

/* From now on the kernel refuses descriptors sent to sock (set on a
 * listening socket, also to the connections it accepts, even before
 * accept). 0, or -1 with errno (ENOPROTOOPT: a kernel before 6.16). */
int squash_refuse_passed_fds(int sock);

#endif
