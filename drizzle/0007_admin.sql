CREATE TABLE `abuse_reports` (
	`id` text PRIMARY KEY NOT NULL,
	`room` text NOT NULL,
	`message_id` integer,
	`reason` text NOT NULL,
	`reporter` text NOT NULL,
	`created_at` text NOT NULL,
	`status` text NOT NULL,
	`resolved_at` text,
	`resolution` text
);
--> statement-breakpoint
CREATE INDEX `abuse_reports_status` ON `abuse_reports` (`status`,`created_at`);--> statement-breakpoint
CREATE INDEX `abuse_reports_room` ON `abuse_reports` (`room`);--> statement-breakpoint
CREATE TABLE `admin_alerts` (
	`id` text PRIMARY KEY NOT NULL,
	`room` text NOT NULL,
	`kind` text NOT NULL,
	`subject` text NOT NULL,
	`summary` text NOT NULL,
	`detail` text NOT NULL,
	`created_at` text NOT NULL,
	FOREIGN KEY (`room`) REFERENCES `rooms`(`uuid`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `admin_alerts_created` ON `admin_alerts` (`created_at`);--> statement-breakpoint
CREATE INDEX `admin_alerts_subject` ON `admin_alerts` (`room`,`kind`,`subject`,`created_at`);--> statement-breakpoint
CREATE TABLE `admin_audit` (
	`id` text PRIMARY KEY NOT NULL,
	`at` text NOT NULL,
	`action` text NOT NULL,
	`room` text,
	`report_id` text,
	`reason` text,
	`via` text NOT NULL,
	`ip` text NOT NULL,
	`detail` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `admin_audit_at` ON `admin_audit` (`at`);--> statement-breakpoint
CREATE INDEX `admin_audit_room` ON `admin_audit` (`room`,`at`);--> statement-breakpoint
ALTER TABLE `rooms` ADD `hidden` integer DEFAULT false NOT NULL;