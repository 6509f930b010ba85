-- Multiagent sessions: child threads' events that the session's own stream and list also
-- show (blocking tool calls, thread status changes, routed answers) are marked here.
ALTER TABLE events ADD COLUMN crosspost INTEGER NOT NULL DEFAULT 0;
