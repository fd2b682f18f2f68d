CREATE TABLE `turn_rooms` (
	`room` text PRIMARY KEY NOT NULL,
	`status` text NOT NULL,
	`data` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `turns` (
	`room` text NOT NULL,
	`id` integer NOT NULL,
	`agent_id` text NOT NULL,
	`status` text NOT NULL,
	`deadline` text,
	`lease_hash` text,
	`data` text NOT NULL,
	PRIMARY KEY(`room`, `id`)
);
--> statement-breakpoint
CREATE INDEX `turns_due` ON `turns` (`deadline`) WHERE status IN ('ready', 'claimed');