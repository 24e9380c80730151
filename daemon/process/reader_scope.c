/* Readers in systemd scopes, through systemd's D-Bus API (reader_scope.h). */
#include "config.h"

#include "process/reader_scope.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "util/log.h"
#include "util/small_file.h"

#define SYSTEMD_DEST "org.freedesktop.systemd1"
#define SYSTEMD_PATH "/org/freedesktop/systemd1"
#define SYSTEMD_MANAGER "org.freedesktop.systemd1.Manager"
/* Every call is to PID 1, which answers at once unless it is overloaded. */
#define CALL_USEC (10ULL * 1000 * 1000)
#define JOIN_WAIT_MS 10000

int reader_scope_systemd_running(void)
{
	return sd_booted() > 0;
}

/* A unit name part: what systemd allows, with '-' (which would make a
 * slice a child of another) and anything else turned into '_'. */
static void unit_part(const char *in, char *out, size_t len)
{
	size_t i = 0;

	for (; *in && i + 1 < len; in++)
		out[i++] = ((*in >= 'a' && *in <= 'z') || (*in >= 'A' && *in <= 'Z') ||
			    (*in >= '0' && *in <= '9') || *in == '.')
				   ? *in
				   : '_';
	out[i] = '\0';
}

int reader_scope_slice_name(const char *instance, uid_t uid, char *out, size_t len)
{
	char part[72];
	int n;

	unit_part(instance, part, sizeof(part));
	if (part[0])
		n = snprintf(out, len, "squashd-readers-%s_u%u.slice", part, (unsigned)uid);
	else
		n = snprintf(out, len, "squashd-readers-u%u.slice", (unsigned)uid);
	return n > 0 && (size_t)n < len ? 0 : -1;
}

/* systemd's private socket needs no D-Bus daemon (minimal nodes have
 * none) and takes root's calls; the system bus is the fallback. */
static int bus_open(sd_bus **bus)
{
	int r = sd_bus_new(bus);

	if (r >= 0) {
		r = sd_bus_set_address(*bus, "unix:path=/run/systemd/private");
		if (r >= 0)
			r = sd_bus_start(*bus);
		if (r >= 0)
			return 0;
		*bus = sd_bus_flush_close_unref(*bus);
	}
	return sd_bus_open_system(bus);
}

static int append_limits(sd_bus_message *m, uint64_t tasks_max, uint64_t memory_max,
			 uint64_t cpu_weight)
{
	int r = sd_bus_message_append(m, "(sv)", "TasksMax", "t", tasks_max ? tasks_max : UINT64_MAX);

	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)", "MemoryMax", "t",
					  memory_max ? memory_max : UINT64_MAX);
	if (r >= 0 && cpu_weight)
		r = sd_bus_message_append(m, "(sv)", "CPUWeight", "t", cpu_weight);
	return r;
}

/* The user's slice with the limits in force now: made, or updated when it
 * exists (a reload may have changed them). */
static int set_slice(sd_bus *bus, const char *slice, uint64_t tasks_max, uint64_t memory_max,
		     uint64_t cpu_weight, char *why, size_t whylen)
{
	sd_bus_error error = SD_BUS_ERROR_NULL;
	sd_bus_message *m = NULL, *reply = NULL;
	int r;

	for (int attempt = 0; attempt < 2; attempt++) {
		bool update = attempt == 1;

		r = sd_bus_message_new_method_call(bus, &m, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
						   update ? "SetUnitProperties" : "StartTransientUnit");
		if (r >= 0)
			r = update ? sd_bus_message_append(m, "sb", slice, 1)
				   : sd_bus_message_append(m, "ss", slice, "fail");
		if (r >= 0)
			r = sd_bus_message_open_container(m, 'a', "(sv)");
		if (r >= 0 && !update)
			r = sd_bus_message_append(m, "(sv)", "Description", "s",
						  "squashd: one user's FUSE servers (squash-reader)");
		if (r >= 0)
			r = append_limits(m, tasks_max, memory_max, cpu_weight);
		if (r >= 0)
			r = sd_bus_message_close_container(m);
		if (r >= 0 && !update)
			r = sd_bus_message_append(m, "a(sa(sv))", 0);
		if (r < 0) {
			snprintf(why, whylen, "building the D-Bus call for %s: %s", slice, strerror(-r));
			break;
		}
		r = sd_bus_call(bus, m, CALL_USEC, &error, &reply);
		m = sd_bus_message_unref(m);
		reply = sd_bus_message_unref(reply);
		if (r >= 0)
			break;
		if (!update && sd_bus_error_has_name(&error, "org.freedesktop.systemd1.UnitExists")) {
			sd_bus_error_free(&error);
			continue;
		}
		snprintf(why, whylen, "systemd: %s %s: %s", update ? "setting the limits of" : "making",
			 slice, error.message ? error.message : strerror(-r));
		break;
	}
	sd_bus_message_unref(m);
	sd_bus_error_free(&error);
	return r < 0 ? -1 : 0;
}

static int start_scope(sd_bus *bus, const char *scope, const char *slice, char *why, size_t whylen)
{
	sd_bus_error error = SD_BUS_ERROR_NULL;
	sd_bus_message *m = NULL, *reply = NULL;
	int r = sd_bus_message_new_method_call(bus, &m, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
					       "StartTransientUnit");

	if (r >= 0)
		r = sd_bus_message_append(m, "ss", scope, "fail");
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'a', "(sv)");
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)", "Description", "s",
					  "squashd: a user's FUSE server (squash-reader)");
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)", "Slice", "s", slice);
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)", "PIDs", "au", 1, (uint32_t)getpid());
	/* At shutdown the jobs (slurmstepd's scope, slurmd) stop first and
	 * their readers after them: the reverse of this start order. */
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)", "Before", "as", 2, "slurmd.service",
					  "slurmstepd.scope");
	/* Gone when the reader is, even when it failed. */
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)", "CollectMode", "s", "inactive-or-failed");
	if (r >= 0)
		r = sd_bus_message_close_container(m);
	if (r >= 0)
		r = sd_bus_message_append(m, "a(sa(sv))", 0);
	if (r < 0) {
		snprintf(why, whylen, "building the D-Bus call for %s: %s", scope, strerror(-r));
	} else if ((r = sd_bus_call(bus, m, CALL_USEC, &error, &reply)) < 0) {
		snprintf(why, whylen, "systemd: making %s in %s: %s", scope, slice,
			 error.message ? error.message : strerror(-r));
	}
	sd_bus_message_unref(m);
	sd_bus_message_unref(reply);
	sd_bus_error_free(&error);
	return r < 0 ? -1 : 0;
}

/* Whether a line of /proc/self/cgroup (the v2 one, or systemd's own v1
 * hierarchy on older hosts) ends in /scope. */
static bool in_scope(const char *scope)
{
	char text[8192];
	int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
	size_t s = strlen(scope);

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	text[n] = '\0';
	for (char *line = text; *line;) {
		size_t len = strcspn(line, "\n");

		if (len > s && line[len - s - 1] == '/' && !strncmp(line + len - s, scope, s))
			return true;
		line += len + (line[len] ? 1 : 0);
	}
	return false;
}

void reader_scope_unit_name(uid_t uid, pid_t pid, char *out, size_t len)
{
	snprintf(out, len, "squashd-reader-u%u-%d.scope", (unsigned)uid, (int)pid);
}

int reader_scope_join(const char *slice, uid_t uid, uint64_t tasks_max, uint64_t memory_max,
		      uint64_t cpu_weight, char *why, size_t whylen)
{
	char scope[READER_SCOPE_UNIT_MAX];
	sd_bus *bus = NULL;
	int r;

	reader_scope_unit_name(uid, getpid(), scope, sizeof(scope));
	if ((r = bus_open(&bus)) < 0) {
		snprintf(why, whylen, "cannot reach systemd over D-Bus: %s", strerror(-r));
		return -1;
	}
	r = set_slice(bus, slice, tasks_max, memory_max, cpu_weight, why, whylen);
	if (r == 0)
		r = start_scope(bus, scope, slice, why, whylen);
	sd_bus_flush_close_unref(bus);
	if (r < 0)
		return -1;
	/* systemd moves us when the scope's start job runs, just after it
	 * answered: wait for the kernel to show it. */
	for (long long deadline = squash_now_ms() + JOIN_WAIT_MS; !in_scope(scope);) {
		struct timespec pause = { 0, 5 * 1000 * 1000 };

		if (squash_now_ms() >= deadline) {
			snprintf(why, whylen, "systemd made %s but did not move the process there within %d s",
				 scope, JOIN_WAIT_MS / 1000);
			return -1;
		}
		nanosleep(&pause, NULL);
	}
	return 0;
}

/* Whether a cgroup directory holds no process, itself or below. */
static bool unpopulated(const char *dir)
{
	char path[4096], text[256];

	if ((size_t)snprintf(path, sizeof(path), "%s/cgroup.events", dir) >= sizeof(path) ||
	    small_file_read(path, text, sizeof(text)) < 0)
		return false;
	return strstr(text, "populated 0") != NULL;
}

static void stop_unit(sd_bus *bus, const char *unit)
{
	sd_bus_error error = SD_BUS_ERROR_NULL;

	(void)sd_bus_call_method(bus, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER, "StopUnit", &error,
				 NULL, "ss", unit, "replace");
	sd_bus_error_free(&error);
}

void reader_scope_end(uid_t uid, pid_t pid)
{
	char scope[READER_SCOPE_UNIT_MAX];
	sd_bus_error error = SD_BUS_ERROR_NULL;
	sd_bus *bus = NULL;
	int r;

	reader_scope_unit_name(uid, pid, scope, sizeof(scope));
	if ((r = bus_open(&bus)) < 0) {
		log_warning("cannot reach systemd to end %s: %s", scope, strerror(-r));
		return;
	}
	/* The usual case: the scope emptied with the reader and systemd
	 * stopped it (NoSuchUnit once collected, NoSuchProcess before). */
	r = sd_bus_call_method(bus, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER, "KillUnit", &error,
			       NULL, "ssi", scope, "all", (int32_t)SIGKILL);
	if (r >= 0)
		log_warning("FUSE server %d left processes behind in %s; killed them", (int)pid, scope);
	else if (!sd_bus_error_has_name(&error, "org.freedesktop.systemd1.NoSuchUnit") &&
		 !sd_bus_error_has_name(&error, "org.freedesktop.systemd1.NoSuchProcess") &&
		 !sd_bus_error_has_name(&error, "org.freedesktop.systemd1.UnitInactive"))
		log_warning("systemd: ending %s: %s", scope, error.message ? error.message : strerror(-r));
	sd_bus_error_free(&error);
	sd_bus_flush_close_unref(bus);
}

void reader_scope_cleanup(const char *base)
{
	sd_bus *bus = NULL;
	DIR *d = opendir(base);
	struct dirent *e;

	if (!d)
		return;
	if (bus_open(&bus) < 0) {
		closedir(d);
		return;
	}
	while ((e = readdir(d))) {
		char dir[4096];
		size_t n = strlen(e->d_name);

		if (strncmp(e->d_name, "squashd-readers-", 16) || n < 7 ||
		    strcmp(e->d_name + n - 6, ".slice") ||
		    (size_t)snprintf(dir, sizeof(dir), "%s/%s", base, e->d_name) >= sizeof(dir))
			continue;
		if (unpopulated(dir))
			stop_unit(bus, e->d_name);
	}
	closedir(d);
	/* The parents too, when nothing is left in them: nothing of squashd's
	 * stays loaded once no reader runs. */
	if (unpopulated(base)) {
		char parent[4096];
		char *slash;

		stop_unit(bus, READER_SCOPE_PARENT_SLICE);
		snprintf(parent, sizeof(parent), "%s", base);
		slash = strrchr(parent, '/');
		if (slash && !strcmp(slash, "/" READER_SCOPE_PARENT_SLICE)) {
			*slash = '\0';
			if (unpopulated(parent))
				stop_unit(bus, "squashd.slice");
		}
	}
	sd_bus_flush_close_unref(bus);
}
