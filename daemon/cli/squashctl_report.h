/* squashctl's views of a status answer: the human one (status) and the
 * Prometheus text exposition format (metrics). */
#ifndef SQUASHCTL_REPORT_H
#define SQUASHCTL_REPORT_H

#include <stdio.h>

#include "squash.pb-c.h"

void print_status(FILE *out, const Squash__NodeStatus *n);
void print_status_json(FILE *out, const Squash__NodeStatus *n);
void print_metrics(FILE *out, const Squash__NodeStatus *n);

/* The per-user budgets, for print_status and (a "user_budgets" member)
 * print_status_json. */
void print_user_budgets(FILE *out, const Squash__NodeStatus *n);
void print_user_budgets_json(FILE *out, const Squash__NodeStatus *n);

/* Upper bound (seconds) of the histogram bucket holding quantile q of
 * ks's answers; < 0 when the bucket is +Inf or there were none. */
double latency_quantile(const Squash__NodeStatus *n, const Squash__RequestKindStats *ks, double q);

#endif
