CREATE TABLE `board_agents` (
	`room` text NOT NULL,
	`agent_id` text NOT NULL,
	`capabilities` text NOT NULL,
	`auth` text NOT NULL,
	`key_ref` text,
	`last_seen` text NOT NULL,
	`lost` integer NOT NULL,
	PRIMARY KEY(`room`, `agent_id`)
);
--> statement-breakpoint
CREATE INDEX `board_agents_seen` ON `board_agents` (`last_seen`) WHERE lost = 0;--> statement-breakpoint
CREATE TABLE `tasks` (
	`room` text NOT NULL,
	`id` integer NOT NULL,
	`status` text NOT NULL,
	`priority` integer NOT NULL,
	`claimant` text,
	`lease_until` text,
	`lease_hash` text,
	`data` text NOT NULL,
	PRIMARY KEY(`room`, `id`)
);
--> statement-breakpoint
CREATE INDEX `tasks_open` ON `tasks` (`room`,`status`,`priority`);--> statement-breakpoint
CREATE INDEX `tasks_lease` ON `tasks` (`lease_until`) WHERE status = 'claimed';