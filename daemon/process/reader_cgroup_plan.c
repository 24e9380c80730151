/* Where readers' cgroups go (reader_cgroup_plan.h). */
#include "config.h"

#include "process/reader_cgroup_plan.h"

#include <stdio.h>
#include <string.h>

#include "process/cgroup_layout.h"

#define CGROUP_ROOT "/sys/fs/cgroup"

static int fail(struct reader_cgroup_plan *plan, const char *why)
{
	plan->kind = READER_CGROUPS_NONE;
	memset(plan->bases, 0, sizeof(plan->bases));
	snprintf(plan->why, sizeof(plan->why), "%s", why);
	return -1;
}

/* out = a + b + c, or -1 when it does not fit. */
static int join3(char *out, size_t len, const char *a, const char *b, const char *c)
{
	int n = snprintf(out, len, "%s%s%s", a, b, c);

	return n >= 0 && (size_t)n < len ? 0 : -1;
}

static int plan_systemd(enum cgroup_layout layout, struct reader_cgroup_plan *plan)
{
	/* Where systemd's tree shows: the unified hierarchy (v2, or hybrid's
	 * /unified), else its named v1 one. */
	const char *tree = layout == CGROUP_LAYOUT_V2	  ? CGROUP_ROOT
			   : layout == CGROUP_LAYOUT_HYBRID ? CGROUP_ROOT "/unified"
							    : CGROUP_ROOT "/systemd";

	plan->kind = READER_CGROUPS_SYSTEMD;
	join3(plan->bases[0], sizeof(plan->bases[0]), tree, "/squashd.slice/squashd-readers.slice", "");
	return 0;
}

static int plan_v2(const char *proc_cgroup, const char *instance, struct reader_cgroup_plan *plan)
{
	char own[READER_CGROUP_PATH_MAX];

	if (cgroup_own_path(proc_cgroup, NULL, own, sizeof(own)) < 0)
		return fail(plan, "no cgroup v2 line in /proc/self/cgroup");
	if (!strcmp(own, "/")) {
		/* The root cgroup may hold processes and hand controllers down. */
		plan->kind = READER_CGROUPS_V2_ROOT;
		if (join3(plan->bases[0], sizeof(plan->bases[0]), CGROUP_ROOT "/squashd-readers.", instance, "") < 0)
			return fail(plan, "the instance name is too long");
		return 0;
	}
	/* Elsewhere only a delegated cgroup is squashd's to divide: no process
	 * may stay in one that hands controllers down, so squashd moves to
	 * daemon/. */
	plan->kind = READER_CGROUPS_V2_DELEGATED;
	if (join3(plan->own, sizeof(plan->own), CGROUP_ROOT, own, "") < 0 ||
	    join3(plan->daemon_dir, sizeof(plan->daemon_dir), plan->own, "/daemon", "") < 0 ||
	    join3(plan->bases[0], sizeof(plan->bases[0]), plan->own, "/readers", "") < 0)
		return fail(plan, "squashd's cgroup path is too long");
	return 0;
}

static int plan_v1(const char *mountinfo, const char *proc_cgroup, const char *instance,
		   struct reader_cgroup_plan *plan)
{
	static const char *const controllers[3] = { "pids", "memory", "cpu" };
	char why[128];

	plan->kind = READER_CGROUPS_V1;
	for (size_t i = 0; i < 3; i++) {
		char mnt[READER_CGROUP_PATH_MAX / 2], own[READER_CGROUP_PATH_MAX / 2];

		if (cgroup_v1_mount_point(mountinfo, controllers[i], mnt, sizeof(mnt)) < 0 ||
		    cgroup_own_path(proc_cgroup, controllers[i], own, sizeof(own)) < 0) {
			if (i == 2)
				break; /* the CPU weight is optional */
			snprintf(why, sizeof(why), "no cgroup v1 %s hierarchy", controllers[i]);
			return fail(plan, why);
		}
		if (join3(plan->bases[i], sizeof(plan->bases[i]), mnt, strcmp(own, "/") ? own : "",
			  "/squashd-readers.") < 0 ||
		    strlen(plan->bases[i]) + strlen(instance) >= sizeof(plan->bases[i]))
			return fail(plan, "squashd's cgroup path is too long");
		strcat(plan->bases[i], instance);
	}
	return 0;
}

int reader_cgroup_plan(const char *mountinfo, const char *proc_cgroup, bool systemd,
		       const char *instance, struct reader_cgroup_plan *plan)
{
	enum cgroup_layout layout = cgroup_layout_from_mountinfo(mountinfo);

	memset(plan, 0, sizeof(*plan));
	if (layout == CGROUP_LAYOUT_NONE)
		return fail(plan, "no cgroup file system mounted");
	/* Where systemd runs it owns every hierarchy, v1 ones included: it
	 * makes the cgroups (and a v1 squashd.service's pids cgroup would
	 * otherwise hold the readers under its TasksMax). */
	if (systemd)
		return plan_systemd(layout, plan);
	if (layout == CGROUP_LAYOUT_V2)
		return plan_v2(proc_cgroup, instance, plan);
	return plan_v1(mountinfo, proc_cgroup, instance, plan);
}
