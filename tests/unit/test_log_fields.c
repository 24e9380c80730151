/* squashd's journal fields (daemon/util/log.h): what each request's log lines
 * carry, per thread; and the plain stderr line when not under systemd. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/log.h"
#include "unit.h"

static char fields[LOG_FIELDS_MAX][LOG_FIELD_LEN];

static void *other_thread(void *arg)
{
	size_t *n = arg;

	*n = log_context_fields(fields);
	return NULL;
}

int main(void)
{
	CHECK_INT(log_context_fields(fields), 0);

	log_context_job(123, 1001);
	log_context_image("/scratch/u/env.sqfs", "fuse");
	CHECK_INT(log_context_fields(fields), 4);
	CHECK_STR(fields[0], "JOB_ID=123");
	CHECK_STR(fields[1], "USER_ID=1001");
	CHECK_STR(fields[2], "IMAGE=/scratch/u/env.sqfs");
	CHECK_STR(fields[3], "MODE=fuse");

	/* Another thread serves another request: none of this one's fields. */
	pthread_t t;
	size_t n_other = 99;
	CHECK_INT(pthread_create(&t, NULL, other_thread, &n_other), 0);
	pthread_join(t, NULL);
	CHECK_INT(n_other, 0);

	/* A release knows the job, not the user. */
	log_context_clear();
	log_context_job(7, -1);
	CHECK_INT(log_context_fields(fields), 1);
	CHECK_STR(fields[0], "JOB_ID=7");
	log_context_clear();
	CHECK_INT(log_context_fields(fields), 0);

	/* Without JOURNAL_STREAM: today's plain line on stderr, no fields. */
	unsetenv("JOURNAL_STREAM");
	log_init(false);
	char path[] = "/tmp/test_log_fields.XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	int saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	log_context_job(42, 0);
	log_info("job %u: %d image(s) ready", 42u, 1);
	log_debug("not shown without debug");
	/* Bytes from users cannot forge a line or break a UTF-8 reader. */
	log_info("image %s", "/x\ny\xff\xc3\xa9.sqfs");
	dup2(saved, STDERR_FILENO);
	close(saved);
	char line[256] = "";
	FILE *f = fdopen(fd, "r");
	rewind(f);
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	CHECK_STR(line, "squashd: info: job 42: 1 image(s) ready\n");
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	CHECK_STR(line, "squashd: info: image /x\\x0ay\\xff\xc3\xa9.sqfs\n");
	CHECK(!fgets(line, sizeof(line), f));
	fclose(f);
	unlink(path);
	return unit_exit_code();
}
