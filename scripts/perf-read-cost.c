/* One read() of a perf_event fd, against a bare system call: the floor under any
 * read()-based region reader on this kernel. cc -O2 scripts/perf-read-cost.c -o /tmp/prc && taskset -c 1 /tmp/prc */
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <stdint.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static int op(int type, long cfg, int group){struct perf_event_attr a;memset(&a,0,sizeof a);a.size=sizeof a;a.type=type;a.config=cfg;a.exclude_kernel=1;a.read_format=PERF_FORMAT_GROUP|PERF_FORMAT_TOTAL_TIME_ENABLED|PERF_FORMAT_TOTAL_TIME_RUNNING;return syscall(SYS_perf_event_open,&a,0,-1,group,0);}
static void bench(const char*name,int fd){uint64_t buf[32];int n=200000;double t=now();for(int i=0;i<n;i++)if(read(fd,buf,sizeof buf)<0){perror("read");return;}t=now()-t;printf("%-28s %.0f ns per read()\n",name,t/n*1e9);}
int main(){
 { int n=1000000; double t=now(); for(int i=0;i<n;i++) syscall(SYS_getppid); t=now()-t; printf("%-28s %.0f ns per call\n","getppid (bare syscall)",t/n*1e9); }
 int pf=op(PERF_TYPE_SOFTWARE,PERF_COUNT_SW_PAGE_FAULTS,-1); bench("page-faults alone",pf);
 int tc=op(PERF_TYPE_SOFTWARE,PERF_COUNT_SW_TASK_CLOCK,-1); bench("task-clock alone",tc);
 int g=op(PERF_TYPE_SOFTWARE,PERF_COUNT_SW_TASK_CLOCK,-1); op(PERF_TYPE_SOFTWARE,PERF_COUNT_SW_PAGE_FAULTS,g); op(PERF_TYPE_SOFTWARE,PERF_COUNT_SW_CONTEXT_SWITCHES,g); bench("group task-clock+pf+cs",g);
 return 0;}
