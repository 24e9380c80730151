#include "config.h"
#include "core/loop_devices.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "core/pinned_loops.h"
#include "util/log.h"

/* A lingering mount holds its device too, until a mount needs it. */
static bool holds_device(const struct mount_entry *m)
{
	return m->key.mode == SQUASH__MOUNT_MODE__KERNEL &&
	       (m->state == MOUNT_MOUNTING || m->state == MOUNT_READY || m->state == MOUNT_UNMOUNTING ||
		m->state == MOUNT_LINGERING);
}

unsigned loop_devices_in_use_locked(struct daemon_state *ds, bool lingering)
{
	unsigned n = 0;

	for (const struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		n += holds_device(m) && (lingering || m->state != MOUNT_LINGERING);
	return n;
}

/* The lingering kernel mount that expires first, or NULL (lock held). */
static struct mount_entry *first_to_expire_locked(struct daemon_state *ds)
{
	struct mount_entry *first = NULL;

	for (struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		if (m->key.mode == SQUASH__MOUNT_MODE__KERNEL && m->state == MOUNT_LINGERING &&
		    (!first || m->linger_until_ms < first->linger_until_ms))
			first = m;
	return first;
}

unsigned loop_devices_user_limit(const struct squashd_config *cfg)
{
	if (cfg->max_loop_devices_per_user)
		return cfg->max_loop_devices_per_user;
	if (!cfg->max_loop_devices)
		return LOOP_DEVICES_USER_DEFAULT;
	return cfg->max_loop_devices / LOOP_DEVICES_USER_DIVISOR ? cfg->max_loop_devices / LOOP_DEVICES_USER_DIVISOR
								 : 1;
}

unsigned loop_devices_of_user_locked(struct daemon_state *ds, uid_t uid)
{
	return registry_user_mounts(&ds->registry, uid, holds_device) + pinned_loops_of_user_locked(ds, uid);
}

bool loop_devices_user_refuses_locked(struct daemon_state *ds, const struct squashd_config *cfg,
				      uid_t uid, char *why, size_t whylen)
{
	unsigned limit = loop_devices_user_limit(cfg), held;

	if (uid == 0 || limit == 0 || (held = loop_devices_of_user_locked(ds, uid)) < limit)
		return false;
	unsigned pinned = pinned_loops_of_user_locked(ds, uid);

	snprintf(why, whylen, "no loop device for a kernel mount: the jobs and sessions of uid %u on this "
		 "node already hold %u kernel mounts, each on a loop device of its own%s "
		 "(max_loop_devices_per_user = %u): end some of that user's jobs or sessions first%s",
		 (unsigned)uid, held, pinned ? ", counting those of its ended sessions still attached" : "",
		 limit, pinned ? ", and the processes that keep copies of ended sessions' images "
				 "(squashctl health names the devices)" : "");
	return true;
}

bool loop_devices_refuse(struct daemon_state *ds, const struct squashd_config *cfg,
			 const struct mount_entry *m, struct teardown *td, char *why, size_t whylen)
{
	unsigned limit = cfg->max_loop_devices;
	struct mount_entry *ended;

	if (limit == 0)
		return false;
	pthread_mutex_lock(&ds->lock);
	/* m itself is MOUNTING: count only the others; busy ones cannot give
	 * their devices up (unmounting ones count until they are gone). */
	/* Devices a copy outside squashd keeps attached are taken too (each
	 * charged to the users whose sessions made such copies, whose share
	 * bounds them); never given up. */
	unsigned pinned = pinned_loops_count_locked(ds);
	unsigned others = loop_devices_in_use_locked(ds, true) - holds_device(m) + pinned;
	unsigned busy = loop_devices_in_use_locked(ds, false) - holds_device(m) + pinned;
	/* Lingering mounts give their devices up, earliest expiry first, as
	 * many as this mount needs, and none when that would not do. */
	for (; busy < limit && others >= limit && (ended = first_to_expire_locked(ds)); others--) {
		log_info("linger of image %s at %s ends: its loop device is needed (max_loop_devices = %u)",
			 ended->image, ended->mount_point, limit);
		ended->state = MOUNT_UNMOUNTING;
		ended->teardown_next = td->head;
		td->head = ended;
	}
	pthread_mutex_unlock(&ds->lock);
	if (others < limit)
		return false;
	snprintf(why, whylen, "no loop device for a kernel mount: squashd already holds %u "
		 "(max_loop_devices = %u)%s", others, limit,
		 pinned ? ", counting those of ended mounts still attached (squashctl health names them)" : "");
	return true;
}

bool loop_devices_exhausted(const struct squashd_config *cfg, unsigned in_use, char *problem,
			    size_t len)
{
	unsigned limit = cfg->max_loop_devices;

	if (cfg->mount_policy == MOUNT_POLICY_FUSE)
		return false; /* no kernel mounts here */
	if (limit && in_use >= limit) {
		snprintf(problem, len, "loop devices exhausted: squashd holds %u of max_loop_devices = %u; "
			 "kernel mounts fail until a job using one ends", in_use, limit);
		return true;
	}
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		snprintf(problem, len, "loop devices exhausted: cannot open /dev/loop-control: %s",
			 strerror(errno));
		return true;
	}
	/* Names a free device, creating one if there is none (which stays
	 * free for the next mount); attaches nothing. */
	int n = ioctl(ctl, LOOP_CTL_GET_FREE);
	int e = errno;
	close(ctl);
	if (n < 0) {
		snprintf(problem, len, "loop devices exhausted: no free loop device and the kernel "
			 "cannot create one (%s)", strerror(e));
		return true;
	}
	char dev[32];
	snprintf(dev, sizeof(dev), "/dev/loop%d", n);
	/* udev or devtmpfs may need a moment for a device just created. */
	for (int tries = 0; access(dev, F_OK) < 0 && errno == ENOENT; tries++) {
		if (tries == 20) {
			snprintf(problem, len, "loop devices exhausted: the kernel's next free device %s "
				 "has no device node (a fixed /dev, as in a container?)", dev);
			return true;
		}
		usleep(10000);
	}
	return false;
}
