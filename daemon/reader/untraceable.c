/* squash-reader --serve out of its user's reach by ptrace (untraceable.h). */
#include "config.h"

#include "reader/untraceable.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

/* The pid tracing this process, from /proc/self/status; 0 when none (or
 * when it cannot be read: no worse than before). */
static long tracer_of_self(void)
{
	char line[256];
	long tracer = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "TracerPid: %ld", &tracer) == 1)
			break;
	fclose(f);
	return tracer;
}

int reader_make_untraceable(char *err, size_t errlen)
{
	long tracer;

	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
		snprintf(err, errlen, "cannot make itself untraceable (prctl PR_SET_DUMPABLE): %s",
			 strerror(errno));
		return -1;
	}
	if ((tracer = tracer_of_self()) != 0) {
		snprintf(err, errlen, "traced by pid %ld since its start", tracer);
		return -1;
	}
	return 0;
}
