/* The devices of a namespace's mounts by mount id (mount_devs.h). */
#include "config.h"
#include "mount/mount_devs.h"

#include <stdlib.h>
#include <sys/sysmacros.h>

#include "clock.h"
#include "util/mountinfo_kept.h"

static int by_mount_id(const void *a, const void *b)
{
	uint64_t x = ((const struct mount_dev *)a)->id, y = ((const struct mount_dev *)b)->id;

	return x < y ? -1 : x > y;
}

struct devs_read {
	struct mount_dev *all;
	size_t n, room;
	long long deadline_ms;
	bool late;
};

static int add_dev(const struct squash_mount *m, void *arg)
{
	struct devs_read *d = arg;

	if (d->n >= MOUNT_DEVS_MAX)
		return 1;
	if (d->n % 256 == 255 && squash_now_ms() >= d->deadline_ms) {
		d->late = true;
		return 1;
	}
	if (d->n == d->room) {
		size_t more = d->room ? d->room * 2 : 256;
		struct mount_dev *grown = realloc(d->all, more * sizeof(*grown));

		if (!grown)
			return 1;
		d->all = grown;
		d->room = more;
	}
	d->all[d->n++] = (struct mount_dev){ m->id, makedev(m->major, m->minor) };
	return 0;
}

struct mount_dev *mount_devs(const char *path, size_t *n, long long deadline_ms, bool *late)
{
	struct devs_read d = { NULL, 0, 0, deadline_ms, false };

	(void)mountinfo_each(path, add_dev, &d);
	*late = d.late;
	*n = d.n;
	if (d.all)
		qsort(d.all, d.n, sizeof(*d.all), by_mount_id);
	return d.all;
}

dev_t mount_dev(const struct mount_dev *devs, size_t n, unsigned long mnt_id)
{
	struct mount_dev key = { mnt_id, 0 };
	const struct mount_dev *d = devs ? bsearch(&key, devs, n, sizeof(*devs), by_mount_id) : NULL;

	return d ? d->dev : 0;
}
