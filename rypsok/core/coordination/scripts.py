"""The store's scripts: every decision the shared limiters make, in Lua, on the store's clock.

Each decision is written once, as a Lua function, and the scripts are built from those
functions: one engine's admission (`ADMIT_SCRIPT`), one caller's tool limit
(`WINDOW_SCRIPT`), and a web_search call's tool limit with every engine it asks
(`SEARCH_SCRIPT`), so that a search costs the store one round trip. Times are integer
microseconds of the store's `TIME`; numbers travel as decimal strings, which Lua's doubles
hold exactly (a time in microseconds stays below 2^53 for centuries).

- An engine's admission is GCRA: a theoretical arrival time (TAT) per engine, moved one
  interval later by each admitted call; a call may start once the TAT is at most
  (burst − 1) intervals ahead; a call whose turn would come after its deadline is refused
  and takes no turn. A turn given back that later calls stand behind is kept as a returned
  turn (a sorted set of its times beside the TAT): the next call whose own turn would come
  later takes it instead, so that a returned turn is used at its time or not at all and the
  provider sees the same schedule as if the call had used it.
- A process that decided alone (the store away, or its connection new) may send a floor:
  how far its own share's schedule runs past now. The TAT is raised to it first, so that
  what the processes admitted alone is spent in the shared bucket too, and a store that
  comes back (or restarts empty) does not hand out a full burst again.
- An admission's answer is (wait, mine, previous, turn, ahead): the microseconds to wait,
  the TATs the call set and replaced ("" for none, and for a returned turn), the turn's
  time on the store's clock (for a give-back), and how far the TAT runs past now (for the
  process's own share); when refused, (-1, the microseconds until the turn, "", "", ahead).
- A caller's tool limit is a sliding window of admitted calls' times in a sorted set; a call
  is admitted while fewer than the limit are in the window. The answer is (1, 0) when
  admitted, (0, the microseconds until a call would be) otherwise.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ADMIT_SCRIPT", "GIVE_BACK_SCRIPT", "SCRIPTS", "SEARCH_SCRIPT", "WINDOW_SCRIPT"]

_FUNCTIONS: Final = """
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function text(n)
  return string.format('%.0f', n)
end

local function keep_ms(last, now)
  return text(math.max(1, math.ceil((last - now) / 1000)) + 1000)
end

local function admit(key, returned, interval, tolerance, max_wait, floor, now)
  local stored = redis.call('GET', key)
  local tat = stored and tonumber(stored)
  if floor >= 0 and (not tat or now + floor > tat) then
    tat = now + floor
    stored = text(tat)
    redis.call('SET', key, stored, 'PX', keep_ms(tat, now))
  end
  local turn = now
  local base = now
  if tat then
    if tat - tolerance > now then turn = tat - tolerance end
    if tat > now then base = tat end
  end
  local ahead = text(math.max(0, base - now))
  redis.call('ZREMRANGEBYSCORE', returned, '-inf', '(' .. text(now))
  local earliest = redis.call('ZRANGE', returned, 0, 0, 'WITHSCORES')
  if earliest[1] then
    local at = tonumber(earliest[2])
    if at < turn and (max_wait < 0 or at - now <= max_wait) then
      redis.call('ZREM', returned, earliest[1])
      return text(at - now), '', '', text(at), ahead
    end
  end
  local wait = turn - now
  if max_wait >= 0 and wait > max_wait then
    return '-1', text(wait), '', '', ahead
  end
  local mine = base + interval
  redis.call('SET', key, text(mine), 'PX', keep_ms(mine, now))
  return text(wait), text(mine), stored or '', text(turn), text(mine - now)
end

local function window(key, limit, span, member, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', text(now - span))
  if redis.call('ZCARD', key) >= limit then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return '0', text(tonumber(oldest[2]) + span - now)
  end
  local stamp = text(now)
  redis.call('ZADD', key, stamp, stamp .. ':' .. member)
  redis.call('PEXPIRE', key, text(math.ceil(span / 1000) + 1000))
  return '1', '0'
end
"""

# KEYS[1]: the engine's TAT, KEYS[2]: its returned turns. ARGV: interval_us, tolerance_us,
# max_wait_us (-1: no deadline), floor_us (-1: none). Returns {wait_us, mine, previous, turn,
# ahead}.
ADMIT_SCRIPT: Final = (
    _FUNCTIONS
    + """
local wait, mine, previous, turn, ahead = admit(KEYS[1], KEYS[2], tonumber(ARGV[1]),
  tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), now_us())
return {wait, mine, previous, turn, ahead}
"""
)

# KEYS[1]: the caller's window. ARGV: limit, window_us, a unique member suffix.
# Returns {admitted, wait_us}.
WINDOW_SCRIPT: Final = (
    _FUNCTIONS
    + """
local admitted, wait = window(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], now_us())
return {admitted, wait}
"""
)

# KEYS[1]: the caller's window; then, per engine the call asks, its TAT and its returned
# turns. ARGV[1..3]: as WINDOW_SCRIPT; then, per engine, ARGV as ADMIT_SCRIPT's. One clock
# reading for all. Returns {admitted, wait_us} when the caller's limit refuses the call (no
# engine is touched: a refused call takes no turn), else {1, 0} followed by each engine's
# {wait_us, mine, previous, turn, ahead}, in the order of KEYS.
SEARCH_SCRIPT: Final = (
    _FUNCTIONS
    + """
local now = now_us()
local admitted, wait = window(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], now)
local answer = {admitted, wait}
if admitted ~= '1' then return answer end
for i = 1, (#KEYS - 1) / 2 do
  local a = 4 + (i - 1) * 4
  local k = 2 + (i - 1) * 2
  local turn_wait, mine, previous, turn, ahead = admit(KEYS[k], KEYS[k + 1],
    tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), now)
  answer[#answer + 1] = turn_wait
  answer[#answer + 1] = mine
  answer[#answer + 1] = previous
  answer[#answer + 1] = turn
  answer[#answer + 1] = ahead
end
return answer
"""
)

# KEYS[1]: the engine's TAT, KEYS[2]: its returned turns. ARGV: mine, previous, turn, a unique
# member. When no later call moved the TAT since (the in-process limiter's rule), puts
# `previous` back: 1. Otherwise, when the turn is still ahead, keeps it as a returned turn for
# the next call: 2. A turn whose time has passed is spent: 0.
GIVE_BACK_SCRIPT: Final = (
    _FUNCTIONS
    + """
local now = now_us()
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) == ARGV[1] then
  if ARGV[2] == '' then
    redis.call('DEL', KEYS[1])
  else
    redis.call('SET', KEYS[1], ARGV[2], 'PX', keep_ms(tonumber(ARGV[2]), now))
  end
  return 1
end
local turn = tonumber(ARGV[3])
if not turn or turn < now then return 0 end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[3] .. ':' .. ARGV[4])
local latest = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[2], keep_ms(tonumber(latest[2]), now))
return 2
"""
)

# Every script, as the Store loads them into each connection it opens.
SCRIPTS: Final = (SEARCH_SCRIPT, ADMIT_SCRIPT, WINDOW_SCRIPT, GIVE_BACK_SCRIPT)
