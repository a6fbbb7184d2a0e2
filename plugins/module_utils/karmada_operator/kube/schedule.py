"""A cron schedule (5 fields or an @macro) in an IANA time zone, as Kubernetes CronJobs read it;
missed ticks run once (:func:`next_run`, :func:`due`). EtcdBackup's ``spec.schedule`` and
``spec.timeZone``, and etcd's scheduled defragmentation
(``spec.etcd.local.defragmentation.schedule``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# --------------------------------------------------------------------------- schedule
# A compact cron evaluator for exactly the grammar the CRD admits (5 fields or an @macro;
# *, values, a-b, N/step, lists; month and weekday names). Semantics as Kubernetes CronJob
# (robfig/cron): day-of-month and day-of-week are ORed when both are restricted (a field
# counts as unrestricted only when it is "*", without a step); "N/step" means N-max/step.

MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
_FIELDS = (("minute", 0, 59, None), ("hour", 0, 23, None), ("day of month", 1, 31, None),
           ("month", 1, 12, ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]),
           ("day of week", 0, 6, ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]))
TIME_ZONE_PATTERN = r"[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*"  # the CRD's spec.timeZone, anchored there


@dataclass(frozen=True)
class Schedule:
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    days_star: bool
    weekdays_star: bool

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.days_star or self.weekdays_star:
            return dom and dow
        return dom or dow


def _value(text: str, low: int, high: int, names: list[str] | None, what: str) -> int:
    if names and text.upper() in names:
        return names.index(text.upper()) + low
    if not re.fullmatch(r"[0-9]{1,2}", text):
        raise ValueError(f"{what} {text!r} is not a number{' or a name' if names else ''}")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{what} {value} is outside {low}-{high}")
    return value


def _field(text: str, low: int, high: int, names: list[str] | None, what: str) -> tuple[set[int], bool]:
    values: set[int] = set()
    star = False
    for item in text.split(","):
        base, _, step_text = item.partition("/")
        step = 1
        if step_text:
            if not re.fullmatch(r"[1-9][0-9]?", step_text):
                raise ValueError(f"{what} step {step_text!r} must be 1-99")
            step = int(step_text)
        if base == "*":
            start, end = low, high
            star = star or step == 1
        elif "-" in base:
            a, b = base.split("-", 1)
            start, end = _value(a, low, high, names, what), _value(b, low, high, names, what)
            if start > end:
                raise ValueError(f"{what} range {base!r} runs backwards")
        else:
            start = _value(base, low, high, names, what)
            end = high if step_text else start  # N/step: from N to the end
        values.update(range(start, end + 1, step))
    return values, star


def parse_schedule(text: str) -> Schedule:
    """Parse ``spec.schedule``; ValueError naming the bad field otherwise."""
    expr = MACROS.get(text.strip().lower(), text.strip()) if text.strip().startswith("@") else text.strip()
    if expr.startswith("@"):
        raise ValueError(f"unknown schedule macro {text!r}; use one of {', '.join(MACROS)}")
    parts = expr.split()
    if len(parts) != 5:
        raise ValueError(f"schedule {text!r} must have 5 fields (minute hour day-of-month month day-of-week)")
    parsed = [_field(p, low, high, names, what) for p, (what, low, high, names) in zip(parts, _FIELDS, strict=True)]
    return Schedule(tuple(sorted(parsed[0][0])), tuple(sorted(parsed[1][0])), frozenset(parsed[2][0]),
                    frozenset(parsed[3][0]), frozenset(parsed[4][0]), parsed[2][1], parsed[4][1])


def zone(name: str | None) -> ZoneInfo:
    """The IANA zone ``name`` (UTC when empty); ValueError when unknown."""
    if not name:
        return ZoneInfo("UTC")
    if not re.fullmatch(TIME_ZONE_PATTERN, name) or len(name) > 64:
        raise ValueError(f"time zone {name!r} is not an IANA name such as Europe/Berlin or UTC")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"time zone {name!r} is not in the time zone database") from exc


def _exists(naive: datetime, tz: ZoneInfo) -> datetime | None:
    """``naive`` wall time in ``tz`` (first occurrence when it repeats), None in a DST gap."""
    aware = naive.replace(tzinfo=tz, fold=0)
    back = aware.astimezone(UTC).astimezone(tz)
    if back.replace(tzinfo=None) != naive:
        return None  # skipped by a spring-forward change
    return aware


def next_run(schedule: str | Schedule, time_zone: str | None, after: datetime) -> datetime | None:
    """The first tick strictly after ``after`` (aware), in UTC; None if the schedule never fires
    (e.g. ``0 0 30 2 *``).

    Ticks are wall-clock times in ``time_zone``. A wall time that does not exist (the hour
    skipped when clocks go forward) is skipped, as CronJob does; a wall time that occurs
    twice (clocks going back) fires once, at its first occurrence (CronJob would fire twice:
    two backups of the same data).
    """
    if after.tzinfo is None:
        raise ValueError("next_run needs an aware datetime")
    sched = schedule if isinstance(schedule, Schedule) else parse_schedule(schedule)
    tz = zone(time_zone)
    local = after.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0)
    day = local.date()
    # Feb 29 on a given weekday can be 28 years away; plain Feb 29 at most 8.
    last = date(min(day.year + 29, 9999), 12, 31)
    while day <= last:
        if sched.day_matches(day):
            for hour in sched.hours:
                if day == local.date() and hour < local.hour:
                    continue
                for minute in sched.minutes:
                    naive = datetime.combine(day, dtime(hour, minute))
                    if naive < local:
                        continue
                    aware = _exists(naive, tz)
                    if aware is not None and aware > after:
                        return aware.astimezone(UTC)
        day = _next_day(day, sched)
    return None


def _next_day(day: date, sched: Schedule) -> date:
    """The next day worth looking at: skips whole months that the schedule excludes."""
    nxt = day + timedelta(days=1)
    for _ in range(13):
        if nxt.month in sched.months:
            return nxt
        year, month = (nxt.year + 1, 1) if nxt.month == 12 else (nxt.year, nxt.month + 1)
        if year > 9999:
            return date.max
        nxt = date(year, month, 1)
    return nxt


@dataclass(frozen=True)
class Due:
    """What the schedule says at ``now``.

    ``run``: start a backup now, for tick ``scheduled_time`` (the most recent tick <= now);
    ``missed``: ticks before it that were not run (they are not made up: one run covers
    them); ``next_time``: the first tick after now (requeue then). ``too_late``: the most
    recent tick is older than the starting deadline, so it is skipped."""

    run: bool
    scheduled_time: datetime | None
    next_time: datetime | None
    missed: int = 0
    too_late: bool = False


def _last_tick(sched: Schedule, tz_name: str | None, since: datetime, now: datetime) -> tuple[datetime | None, int]:
    """The most recent tick in (since, now] and how many ticks of that interval precede it
    (counted up to 1000). Searches back from now in growing windows, so a schedule that
    ticks every minute after a week of downtime costs 60 steps, not 10,000."""
    for window in (timedelta(hours=1), timedelta(days=1), timedelta(days=32), timedelta(days=367),
                   timedelta(days=366 * 30)):
        start = max(since, now - window)
        tick = next_run(sched, tz_name, start)
        if tick is None or tick > now:
            if start == since:
                return None, 0
            continue
        last = tick
        while True:
            nxt = next_run(sched, tz_name, last)
            if nxt is None or nxt > now:
                break
            last = nxt
        # ticks between `since` and the window start were missed too
        missed, probe = 0, next_run(sched, tz_name, since)
        while probe is not None and probe < last and missed < 1000:
            missed += 1
            probe = next_run(sched, tz_name, probe)
        return last, missed
    return None, 0


def due(schedule: str, time_zone: str | None, last_schedule_time: datetime | None, now: datetime,
        created: datetime | None = None, suspend: bool = False,
        starting_deadline: timedelta | None = None) -> Due:
    """Whether a scheduled EtcdBackup should start a run at ``now``.

    Ticks count from ``last_schedule_time`` (status.lastScheduleTime), or from ``created``
    (metadata.creationTimestamp) before the first run: a new schedule waits for its first
    tick. After downtime, missed ticks run once (the most recent of them), like CronJob. With
    ``starting_deadline``, a tick older than that is not started late (CronJob's
    startingDeadlineSeconds); the next tick is waited for instead. ``suspend``: never run,
    but ``next_time`` still says when it would.
    """
    if now.tzinfo is None:
        raise ValueError("due needs an aware now")
    sched = parse_schedule(schedule)
    since = last_schedule_time or created or now
    tick, missed = _last_tick(sched, time_zone, since, now)
    nxt = next_run(sched, time_zone, now)
    if tick is None:
        return Due(False, None, nxt)
    if suspend:
        return Due(False, tick, nxt, missed)
    if starting_deadline is not None and now - tick > starting_deadline:
        return Due(False, tick, nxt, missed, too_late=True)
    return Due(True, tick, nxt, missed)


